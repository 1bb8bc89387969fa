// Hostile input, resources and silence (docs/security.md, "Hostile input"; issue cases 7
// and 8): solver searches that end fast with advice that is right, work that grows without
// bound shows its progress, no nan from the PLD accountant, and the build's discipline
// (the product binary does not link Check; the sanitizer build compiles the SIMD paths
// the release build runs). The MPI tests' LeakSanitizer suppressions are exercised by
// tests/test_cluster_cli.c, whose one helper builds every mpirun command.
//
// End-to-end runs start $FEDPRIV_BIN (skipped when it is unset) on a tiny CSV federation.
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "scratch.h"
#include "core/clock.h"

static char out_buf[1 << 16], err_buf[1 << 16];
static char tmp_dir[256];

static void make_tmp_dir(void) { scratch_make(tmp_dir, sizeof tmp_dir, "limits"); }

static void remove_tmp_dir(void) { scratch_remove(tmp_dir); }

// The wall-time limit of a run that must be fast: `seconds` in the release build, times
// CK_TIMEOUT_MULTIPLIER (make test SANITIZE=1 sets 3; ASan and UBSan are that much slower).
static double time_limit(double seconds) {
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    double k = m && *m ? atof(m) : 1.0;
    return seconds * (k >= 1.0 ? k : 1.0);
}

static int skip_without_bin(const char *test) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (bin && *bin)
        return 0;
    fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it) [%s]\n", test);
    return 1;
}

// A dp-sgd federation on a 200-row CSV (4 clients, 2 rounds of 8 local steps at rate about
// 1/4: the accountant's q 0.25, 16 steps) whose defense is `defense`; the config's path.
static void write_dpsgd_config(const char *defense, char *cfg, size_t n) {
    char csv[300];
    snprintf(csv, sizeof csv, "%s/toy.csv", tmp_dir);
    FILE *f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "f1,f2,label\n");
    for (int i = 0; i < 200; i++)
        fprintf(f, "%g,%g,%d\n", (i % 7) / 7.0 - 0.5 + (i % 2) * 0.4, (i % 5) / 5.0, i % 2);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(cfg, n, "%s/cfg.json", tmp_dir);
    f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},\n"
            " \"federation\": {\"clients\": 4, \"sample_rate\": 0.5, \"rounds\": 2, \"local_epochs\": 2,\n"
            "                \"samples_per_client\": 20, \"batch_size\": 5, \"lr\": 0.2},\n"
            " \"defense\": %s, \"threads\": 1}\n",
            csv, defense);
    ck_assert_int_eq(fclose(f), 0);
}

// The right advice for a target whose noise the PLD accountant cannot account: one line
// naming the target, RDP's sigma for it and what it allows, never "use a larger delta"
// (the round-off of an overflowed loss), never a nan.
static void assert_refusal_advice(const char *what, const char *target, const char *err) {
    char want[64];
    snprintf(want, sizeof want, "target epsilon %s needs sigma below ", target);
    ck_assert_msg(cli_count_lines(err) == 1, "%s: want one line, got \"%s\"", what, err);
    ck_assert_msg(strstr(err, want) != NULL, "%s: \"%s\" lacks \"%s\"", what, err, want);
    ck_assert_msg(strstr(err, "the RDP accountant meets it at sigma ") != NULL, "%s: %s", what, err);
    ck_assert_msg(strstr(err, "no meaningful protection") != NULL, "%s: %s", what, err);
    ck_assert_msg(strstr(err, "larger delta") == NULL, "%s: wrong advice: %s", what, err);
    ck_assert_msg(strstr(err, "nan") == NULL, "%s: nan in \"%s\"", what, err);
}

// Case 7: dp-sgd "epsilon": 1e9 searched σ for 60 s in pld_sigma_for_epsilon, then
// advised "use a larger delta"; 1e4 gave that advice at once. Both now end at once with
// exit 2, one line naming defense.epsilon and the advice that is right.
START_TEST(dpsgd_huge_epsilon_is_refused_fast_with_right_advice) {
    if (skip_without_bin("dpsgd_huge_epsilon_is_refused_fast_with_right_advice"))
        return;
    make_tmp_dir();
    static const char *const targets[] = {"1e+09", "10000"};
    for (int k = 0; k < 2; k++) {
        char def[128], cfg[300], res[300];
        snprintf(def, sizeof def, "{\"name\": \"dp-sgd\", \"epsilon\": %s, \"delta\": 1e-5}", targets[k]);
        write_dpsgd_config(def, cfg, sizeof cfg);
        snprintf(res, sizeof res, "%s/result.json", tmp_dir);
        const char *args[] = {"train", "--config", cfg, "--out", res, NULL};
        double t0 = fp_monotonic_seconds();
        int rc = cli_run(args, out_buf, err_buf, sizeof out_buf);
        double took = fp_monotonic_seconds() - t0;
        ck_assert_msg(rc == 2, "epsilon %s: exit %d: %s", targets[k], rc, err_buf);
        ck_assert_msg(took < time_limit(5.0), "epsilon %s: %.1f s to refuse", targets[k], took);
        ck_assert_msg(strstr(err_buf, "defense.epsilon: ") != NULL, "epsilon %s: %s", targets[k], err_buf);
        assert_refusal_advice(def, targets[k], err_buf);
        ck_assert_msg(access(res, F_OK) != 0, "epsilon %s: a result was written", targets[k]);
    }
    // The same through `fedpriv accountant --method pld --target-eps`, at q 0.01 over 100
    // steps (the grid is the caller's there, so a coarser one may be offered).
    for (int k = 0; k < 2; k++) {
        const char *args[] = {"accountant", "--method", "pld", "--q", "0.01", "--steps", "100", "--delta", "1e-5",
                              "--target-eps", k ? "1e4" : "1e9", NULL};
        double t0 = fp_monotonic_seconds();
        int rc = cli_run(args, out_buf, err_buf, sizeof out_buf);
        double took = fp_monotonic_seconds() - t0;
        ck_assert_msg(rc == 2, "accountant %s: exit %d: %s", args[10], rc, err_buf);
        ck_assert_msg(took < time_limit(5.0), "accountant %s: %.1f s to refuse", args[10], took);
        ck_assert_msg(out_buf[0] == '\0', "accountant %s: partial output %s", args[10], out_buf);
        assert_refusal_advice(args[10], targets[k], err_buf);
    }
    remove_tmp_dir();
}
END_TEST

// Case 7: `accountant --method pld --sigma 1e-300` ended "(tail -nan, alias 0, round-off
// -nan); use a larger delta" where RDP says inf. Now inf with the reason (σ² underflows),
// as for σ = 0, and no nan in text or JSON; a σ too small for the grid but not for a
// double (1e-5) is refused with one line that names the RDP accountant, not δ.
START_TEST(pld_tiny_sigma_is_inf_with_its_reason) {
    if (skip_without_bin("pld_tiny_sigma_is_inf_with_its_reason"))
        return;
    const char *text[] = {"accountant", "--method", "pld", "--q", "0.01", "--steps", "100", "--delta", "1e-5",
                          "--sigma", "1e-300", NULL};
    int rc = cli_run(text, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_buf);
    ck_assert_msg(strncmp(out_buf, "epsilon inf  (no finite bound: sigma below 1.49e-154", 52) == 0, "%s", out_buf);
    ck_assert_msg(!strstr(out_buf, "nan") && !strstr(err_buf, "nan"), "nan in \"%s\" / \"%s\"", out_buf, err_buf);
    const char *json[] = {"accountant", "--method", "pld", "--q", "0.01", "--steps", "100", "--delta", "1e-5",
                          "--sigma", "1e-300", "--json", NULL};
    rc = cli_run(json, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_buf);
    ck_assert_msg(strstr(out_buf, "\"epsilon\":null") && strstr(out_buf, "\"no_finite_bound\":\"sigma below 1.49e-154"),
                  "%s", out_buf);
    ck_assert_msg(!strstr(out_buf, "nan"), "%s", out_buf);
    const char *small[] = {"accountant", "--method", "pld", "--q", "0.01", "--steps", "100", "--delta", "1e-5",
                           "--sigma", "1e-5", NULL};
    double t0 = fp_monotonic_seconds();
    rc = cli_run(small, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 1 || rc == 2, "sigma 1e-5: exit %d: %s", rc, err_buf);
    ck_assert_msg(fp_monotonic_seconds() - t0 < time_limit(5.0), "sigma 1e-5: slow");
    ck_assert_msg(cli_count_lines(err_buf) == 1, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "one step's privacy loss passes 700") && strstr(err_buf, "use the RDP accountant"),
                  "%s", err_buf);
    ck_assert_msg(!strstr(err_buf, "larger delta") && !strstr(err_buf, "nan"), "%s", err_buf);
}
END_TEST

// Runs argv (argv[0] a path), stdout to /dev/null, until its stderr holds `want` or
// `seconds` pass; then kills it. got receives what stderr said (NUL-terminated).
static void stderr_until(const char *const *argv, const char *want, double seconds, char *got, size_t cap) {
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(fd[1], 2);
        close(fd[0]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    got[0] = '\0';
    double t0 = fp_monotonic_seconds();
    while (!strstr(got, want) && fp_monotonic_seconds() - t0 < seconds && len < cap - 1) {
        struct pollfd p = {fd[0], POLLIN, 0};
        if (poll(&p, 1, 200) > 0) {
            ssize_t r = read(fd[0], got + len, cap - 1 - len);
            if (r <= 0)
                break;
            len += (size_t)r;
            got[len] = '\0';
        }
    }
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    close(fd[0]);
}

// Case 7: `audit --samples 1000000000000` was about 20 h of silent work. The rule for
// every size knob: a stated limit, and where the work up to it can outlast seconds, a
// progress line with the ETA on stderr, at most every 10 s. Past the limit: exit 2.
START_TEST(audit_huge_samples_shows_progress_and_past_the_limit_is_refused) {
    if (skip_without_bin("audit_huge_samples_shows_progress"))
        return;
    const char *over[] = {"audit", "--mechanism", "laplace", "--clip", "1", "--epsilon", "1", "--samples",
                          "1000000000001", NULL};
    int rc = cli_run(over, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err_buf);
    ck_assert_msg(cli_count_lines(err_buf) == 1 && strstr(err_buf, "--samples"), "%s", err_buf);

    // At the limit: a progress line within a few seconds, then the run is stopped.
    static const char *const knobs[][2] = {{"--samples", "moments,epsilon"}, {"--support-samples", "support"}};
    for (int k = 0; k < 2; k++) {
        const char *argv[] = {getenv("FEDPRIV_BIN"), "audit", "--mechanism", "laplace", "--clip", "1", "--epsilon",
                              "1", knobs[k][0], "1000000000000", "--test", knobs[k][1], NULL};
        char got[4096];
        double limit = time_limit(8.0);
        stderr_until(argv, "ETA", limit, got, sizeof got);
        ck_assert_msg(strstr(got, " of 2000000000000 draws (") && strstr(got, "ETA"),
                      "%s 10^12: no progress line in %.0f s: \"%s\"", knobs[k][0], limit, got);
    }
}
END_TEST

// The same rule for the attacks' knobs: DLG at its limits (steps 10^6, restarts 1000:
// 10^9 inversion steps, days) reports its steps with the ETA at most every 10 s. Needs
// Fashion-MNIST (make deps: dataset-fashion-mnist); skipped without it.
START_TEST(dlg_at_its_limits_shows_progress) {
    if (skip_without_bin("dlg_at_its_limits_shows_progress"))
        return;
    make_tmp_dir();
    char cfg[300], out[300];
    snprintf(cfg, sizeof cfg, "%s/dlg.json", tmp_dir);
    snprintf(out, sizeof out, "%s/out", tmp_dir);
    FILE *f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"train_samples\": 200, \"test_samples\": 100},"
               " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"}, \"federation\": {\"clients\": 4},"
               " \"defense\": {\"name\": \"none\"}, \"threads\": 1,"
               " \"attack\": {\"images\": [0], \"steps\": 1000000, \"restarts\": 1000, \"attacker\": \"single\"}}\n");
    ck_assert_int_eq(fclose(f), 0);
    const char *argv[] = {getenv("FEDPRIV_BIN"), "attack", "dlg", "--config", cfg, "--out", out, NULL};
    char got[8192];
    double limit = time_limit(20.0);
    stderr_until(argv, "ETA", limit, got, sizeof got);
    if (strstr(got, "fashion-mnist") && !strstr(got, "inversion steps")) {
        fprintf(stderr, "SKIP: Fashion-MNIST is not installed (%s) [dlg_at_its_limits_shows_progress]\n", got);
        remove_tmp_dir();
        return;
    }
    ck_assert_msg(strstr(got, "dlg: ") && strstr(got, " of 1000000000 inversion steps (") && strstr(got, "ETA"),
                  "no progress line in %.0f s: \"%s\"", limit, got);
    remove_tmp_dir();
}
END_TEST

// The path of `name` on PATH, or NULL.
static const char *on_path(const char *name, char *buf, size_t n) {
    const char *p = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", p ? p : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, n, "%s/%s", d, name);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

// Case 8: the product binary linked the test framework (check was in the link line's
// PKGS). Its dynamic section needs no Check or subunit library, it holds no Check
// symbol, and the Makefile's link line for it (make -n, relinking after cli/main.c)
// names neither.
START_TEST(product_binary_does_not_link_check) {
    if (skip_without_bin("product_binary_does_not_link_check"))
        return;
    const char *bin = getenv("FEDPRIV_BIN");
    char readelf[512], make[512];
    if (on_path("readelf", readelf, sizeof readelf)) {
        const char *argv[] = {readelf, "-d", bin, NULL};
        ck_assert_int_eq(cli_exec(argv, out_buf, err_buf, sizeof out_buf), 0);
        ck_assert_msg(strstr(out_buf, "(NEEDED)") != NULL, "readelf -d %s: %s", bin, out_buf);
        ck_assert_msg(!strstr(out_buf, "libcheck") && !strstr(out_buf, "libsubunit"), "%s needs Check:\n%s", bin,
                      out_buf);
    } else
        fprintf(stderr, "SKIP: readelf is not installed (binutils) [product_binary_does_not_link_check]\n");
    FILE *f = fopen(bin, "rb");
    ck_assert_ptr_nonnull(f);
    static char chunk[1 << 20];
    size_t got, keep = 0;
    const char *sym = "srunner_run";
    while ((got = fread(chunk + keep, 1, sizeof chunk - keep, f)) > 0) {
        size_t have = keep + got;
        ck_assert_msg(memmem(chunk, have, sym, strlen(sym)) == NULL, "%s holds Check's %s", bin, sym);
        keep = have < strlen(sym) ? have : strlen(sym);
        memmove(chunk, chunk + have - keep, keep); // the tail, in case the name straddles two reads
    }
    fclose(f);

    // The link line itself (the archive's objects are only pulled in when used, so the
    // binary alone could not show that Check is on it).
    char cwd[1024], target[1024];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    size_t lc = strlen(cwd);
    if (!on_path("make", make, sizeof make) || access("Makefile", R_OK) != 0 || strncmp(bin, cwd, lc) != 0 ||
        bin[lc] != '/') {
        fprintf(stderr, "SKIP: no make, or FEDPRIV_BIN outside this tree [product_binary_does_not_link_check]\n");
        return;
    }
    snprintf(target, sizeof target, "%s", bin + lc + 1);
    char build[1024], build_arg[1100];
    snprintf(build, sizeof build, "%s", target);
    *strrchr(build, '/') = '\0';
    snprintf(build_arg, sizeof build_arg, "BUILD=%s", build);
    unsetenv("MAKEFLAGS"); // not the jobserver of a make that runs the tests
    unsetenv("MFLAGS");
    unsetenv("MAKELEVEL");
    const char *argv[] = {make, "-n", "--no-print-directory", "-W", "cli/main.c", build_arg, target, NULL};
    int rc = cli_exec(argv, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 0, "make -n %s: exit %d: %s", target, rc, err_buf);
    char needle[1100];
    snprintf(needle, sizeof needle, "-o %s ", target);
    const char *link = strstr(out_buf, needle);
    ck_assert_msg(link != NULL, "no link line for %s in:\n%s", target, out_buf);
    const char *eol = strchr(link, '\n');
    size_t n = eol ? (size_t)(eol - link) : strlen(link);
    char line[8192];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), link);
    ck_assert_msg(!strstr(line, "-lcheck") && !strstr(line, "-lsubunit"), "the product links Check: %s", line);
}
END_TEST

// Case 8: the sanitizer build compiled without -march=native, so ASan and UBSan never ran
// the AVX-512 paths (defenses/dp/dgauss.c, mech_laplace.c, mech_gaussian.c) the release
// build runs. The tests compile with the library's CFLAGS: on a CPU with AVX-512F and DQ,
// every build this runs in (release and SANITIZE=1) must have compiled those paths, which
// tests/test_mechanisms.c (fast_path_matches_oracle) then checks bit for bit against the
// per-element oracle. (make valgrind's portable build, which cannot run them, runs other
// suites: VALGRIND_SUITES.)
START_TEST(every_build_compiles_the_simd_paths_the_cpu_runs) {
    __builtin_cpu_init();
    int cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    int built = 1;
#else
    int built = 0;
#endif
    ck_assert_msg(!cpu || built, "this CPU has AVX-512F/DQ but this build did not compile the AVX-512 paths "
                                 "(the sanitizer build needs -march=native like the release build)");
}
END_TEST

Suite *suite_hostile_limits(void) {
    Suite *s = suite_create("hostile_limits");
    TCase *t = tcase_create("limits");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, dpsgd_huge_epsilon_is_refused_fast_with_right_advice);
    tcase_add_test(t, pld_tiny_sigma_is_inf_with_its_reason);
    tcase_add_test(t, audit_huge_samples_shows_progress_and_past_the_limit_is_refused);
    tcase_add_test(t, dlg_at_its_limits_shows_progress);
    tcase_add_test(t, product_binary_does_not_link_check);
    tcase_add_test(t, every_build_compiles_the_simd_paths_the_cpu_runs);
    suite_add_tcase(s, t);
    return s;
}
