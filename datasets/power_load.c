// Power-load data: the seeded synthetic generator (a GEFCom2012 stand-in), the CSV
// reader for real data of the same shape, sliding windows, the natural per-zone
// partition and the seasonal-naive reference forecast. Shapes and features are
// described in datasets/power_load.h.
#include "datasets/power_load.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define TWO_PI 6.283185307179586

PowerLoadConfig power_load_defaults(void) {
    return (PowerLoadConfig){.zones = 20, .days = 1650, .window = 24, .stride = 97, .test_fraction = 0.2,
                             .seed = 2012};
}

void power_load_series_free(PowerLoadSeries *s) {
    if (!s)
        return;
    free(s->load);
    free(s->temperature);
    free(s->hour);
    free(s->weekday);
    free(s->holiday);
    free(s);
}

static PowerLoadSeries *series_alloc(int zones, int hours, FpError *err) {
    PowerLoadSeries *s = fp_calloc(1, sizeof *s, err);
    if (!s)
        return NULL;
    s->zones = zones;
    s->hours = hours;
    s->load = fp_malloc(sizeof(float) * (size_t)zones * hours, err);
    s->temperature = fp_malloc(sizeof(float) * (size_t)hours, err);
    s->hour = fp_malloc((size_t)hours, err);
    s->weekday = fp_malloc((size_t)hours, err);
    s->holiday = fp_malloc((size_t)hours, err);
    if (!s->load || !s->temperature || !s->hour || !s->weekday || !s->holiday) {
        power_load_series_free(s);
        return NULL;
    }
    return s;
}

// -- calendar (proleptic Gregorian, day 0 = 2004-01-01, a Thursday) -------------------
// Hinnant's civil_from_days.
static void civil_from_days(long z, int *y, int *m, int *d) {
    z += 719468;
    long era = (z >= 0 ? z : z - 146096) / 146097;
    long doe = z - era * 146097;
    long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

#define DAYS_1970_TO_2004 12418L

// US federal holidays (the GEFCom2012 holiday list's kind): fixed dates and the
// n-th / last weekday rules. weekday: Monday = 0.
static int is_holiday(int m, int d, int weekday) {
    int nth = (d - 1) / 7 + 1, last = d + 7 > (m == 5 ? 31 : 30);
    if ((m == 1 && d == 1) || (m == 7 && d == 4) || (m == 11 && d == 11) || (m == 12 && d == 25))
        return 1;
    if (weekday == 0 && ((m == 1 && nth == 3) || (m == 2 && nth == 3) || (m == 5 && last) || (m == 9 && nth == 1) ||
                         (m == 10 && nth == 2)))
        return 1;
    return weekday == 3 && m == 11 && nth == 4; // Thanksgiving
}

// -- the synthetic generator ------------------------------------------------------------
typedef struct ZoneParams {
    double base, growth, amp, skew, phase, weekend, holiday, t0, cool, heat, noise_rho, noise_sd;
} ZoneParams;

static double uniform(RngStream *r, double lo, double hi) { return lo + (hi - lo) * rng_next_uniform(r); }

static ZoneParams zone_params(uint64_t seed, int z) {
    RngStream r = rng_stream(seed, RNG_DATA, 1, (uint32_t)z);
    ZoneParams p;
    p.base = exp(uniform(&r, log(20.0), log(300.0)));
    p.growth = uniform(&r, -0.01, 0.04);
    p.amp = uniform(&r, 0.12, 0.30);
    p.skew = uniform(&r, -0.5, 0.5);     // weight of the second harmonic: morning vs evening peak
    p.phase = uniform(&r, -1.5, 1.5);    // hours
    p.weekend = uniform(&r, 0.05, 0.18);
    p.holiday = uniform(&r, 0.05, 0.15);
    p.t0 = uniform(&r, 16.0, 20.0);      // comfort temperature (°C)
    p.cool = uniform(&r, 4e-4, 1.2e-3);  // relative load per °C² above t0
    p.heat = uniform(&r, 2e-4, 8e-4);    // and below
    p.noise_rho = uniform(&r, 0.85, 0.95);
    p.noise_sd = uniform(&r, 0.01, 0.03);
    if (z == 9) { // one flat industrial zone: little daily or weather swing, shut on holidays
        p.amp = 0.04;
        p.skew = 0;
        p.weekend = 0.02;
        p.holiday = 0.30;
        p.cool *= 0.2;
        p.heat *= 0.2;
    }
    return p;
}

FpStatus power_load_generate(const PowerLoadConfig *cfg, PowerLoadSeries **out, FpError *err) {
    *out = NULL;
    if (cfg->zones < 1 || cfg->zones > POWER_LOAD_MAX_ZONES || cfg->days < 14 || cfg->days > 100000)
        return fp_fail(err, FP_EPARAM, "power-load: zones must be in [1, %d] and days in [14, 100000]",
                       POWER_LOAD_MAX_ZONES);
    int H = cfg->days * 24;
    PowerLoadSeries *s = series_alloc(cfg->zones, H, err);
    if (!s)
        return err ? err->code : FP_ENOMEM;
    // Shared temperature: a seasonal sinusoid (peak in late July), a daily cycle (peak at
    // 15 h) and weather anomalies, AR(1) per hour (φ = 0.98, about two days' memory) with
    // stationary sd 4.5 °C, the size of day-to-day anomalies in a temperate climate.
    RngStream tr = rng_stream(cfg->seed, RNG_DATA, 0, 0);
    double weather = 0;
    for (int h = 0; h < H; h++) {
        long day = h / 24;
        int y, m, d, hr = h % 24, wd = (int)((day + 3) % 7);
        civil_from_days(day + DAYS_1970_TO_2004, &y, &m, &d);
        double doy = (double)(day % 365);
        weather = 0.98 * weather + 0.9 * rng_next_normal(&tr);
        s->temperature[h] = (float)(13.0 + 12.0 * sin(TWO_PI * (doy - 115) / 365.25) +
                                    4.0 * sin(TWO_PI * (hr - 9) / 24.0) + weather);
        s->hour[h] = (uint8_t)hr;
        s->weekday[h] = (uint8_t)wd;
        s->holiday[h] = (uint8_t)is_holiday(m, d, wd);
    }
    for (int z = 0; z < cfg->zones; z++) {
        ZoneParams p = zone_params(cfg->seed, z);
        RngStream nr = rng_stream(cfg->seed, RNG_DATA, 2, (uint32_t)z);
        double noise = 0, innov = p.noise_sd * sqrt(1 - p.noise_rho * p.noise_rho);
        for (int h = 0; h < H; h++) {
            double hr = s->hour[h] + 0.0, years = h / (24.0 * 365.25);
            double profile = sin(TWO_PI * (hr - 9 - p.phase) / 24) + p.skew * sin(2 * TWO_PI * (hr - 7 - p.phase) / 24);
            int wd = s->weekday[h];
            double week = wd == 5 ? p.weekend : wd == 6 ? 1.3 * p.weekend : 0;
            double daily = (wd >= 5 || s->holiday[h]) ? 0.7 : 1.0;
            double dt = s->temperature[h] - p.t0;
            double weather_load = dt > 0 ? p.cool * dt * dt : p.heat * dt * dt;
            noise = p.noise_rho * noise + innov * rng_next_normal(&nr);
            double rel = 1 + p.amp * daily * profile - week - p.holiday * s->holiday[h] + weather_load + noise;
            if (rel < 0.2)
                rel = 0.2;
            s->load[(size_t)z * H + h] = (float)(p.base * (1 + p.growth * years) * rel);
        }
    }
    *out = s;
    return FP_OK;
}

// -- the CSV reader ----------------------------------------------------------------------
// The header's fields (unquoted, trimmed) into names[0..n); returns n or -1.
static int header_fields(const char *path, char names[][64], int max, FpError *err) {
    unsigned char *buf = NULL;
    size_t len = 0;
    if (dataset_read_file(path, &buf, &len, err) != FP_OK)
        return -1;
    char *p = (char *)buf;
    if (len >= 3 && (unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF)
        p += 3;
    while (*p == '\n' || *p == '\r')
        p++;
    int n = 0;
    while (*p && *p != '\n' && *p != '\r') {
        char *start = p;
        while (*p && *p != ',' && *p != '\n' && *p != '\r')
            p++;
        char *end = p;
        while (start < end && (isspace((unsigned char)*start) || *start == '"'))
            start++;
        while (end > start && (isspace((unsigned char)end[-1]) || end[-1] == '"'))
            end--;
        if (n < max)
            snprintf(names[n], 64, "%.*s", (int)(end - start), start);
        n++;
        if (*p == ',')
            p++;
    }
    free(buf);
    return n;
}

FpStatus power_load_read_csv(const char *path, PowerLoadSeries **out, FpError *err) {
    static const char *const fixed[] = {"hour", "weekday", "holiday", "temperature"};
    *out = NULL;
    Dataset *d = NULL;
    // csv_load checks the cells (numbers, ragged rows) and names the line and, for a bad
    // cell, the column; a ragged row's message names only the line, so add the column
    // where the row goes wrong (the first missing or extra field).
    FpStatus cst = csv_load(path, NULL, NULL, &d, err);
    if (cst != FP_OK) {
        size_t pl = strlen(path);
        int line, got, want;
        const char *has = err ? strstr(err->msg, "the header has ") : NULL;
        if (cst == FP_EFORMAT && has && strncmp(err->msg, path, pl) == 0 &&
            sscanf(err->msg + pl, ":%d: %d field", &line, &got) == 2 && sscanf(has, "the header has %d", &want) == 1)
            fp_fail(err, FP_EFORMAT, "%s:%d:%d: %d field%s, the header has %d (column %d is %s)", path, line,
                    (got < want ? got : want) + 1, got, got == 1 ? "" : "s", want, (got < want ? got : want) + 1,
                    got < want ? "missing" : "extra");
        return cst;
    }
    char names[8][64];
    int nf = header_fields(path, names, 8, err);
    FpStatus st = FP_OK;
    if (nf < 0) {
        dataset_free(d);
        return err ? err->code : FP_EIO;
    }
    for (int j = 0; j < 4; j++)
        if (j >= nf || strcmp(names[j], fixed[j]) != 0) {
            st = fp_fail(err, FP_EFORMAT,
                         "%s:1:%d: the header must start hour,weekday,holiday,temperature and then one load column "
                         "per zone; column %d is \"%s\"",
                         path, j + 1, j + 1, j < nf ? names[j] : "(missing)");
            goto out;
        }
    int zones = d->w - 4, H = d->n;
    if (zones < 1) {
        st = fp_fail(err, FP_EFORMAT, "%s:1: no load columns after hour,weekday,holiday,temperature", path);
        goto out;
    }
    if (zones > POWER_LOAD_MAX_ZONES || H < 14 * 24) {
        st = fp_fail(err, FP_EFORMAT, "%s: %d zones and %d hourly rows: need 1..%d zones and at least 14 days", path,
                     zones, H, POWER_LOAD_MAX_ZONES);
        goto out;
    }
    PowerLoadSeries *s = series_alloc(zones, H, err);
    if (!s) {
        st = err ? err->code : FP_ENOMEM;
        goto out;
    }
    for (int h = 0; h < H; h++) {
        const float *row = d->x + (size_t)h * d->w;
        // Rows are data rows (1-based) after the header; csv_load has already named any
        // malformed line, so what is left are values out of their range.
        int hr = (int)row[0], wd = (int)row[1], hol = (int)row[2];
        if (row[0] != hr || hr < 0 || hr > 23 || row[1] != wd || wd < 0 || wd > 6 || row[2] != hol || hol < 0 ||
            hol > 1) {
            int col = (row[0] != hr || hr < 0 || hr > 23) ? 1 : (row[1] != wd || wd < 0 || wd > 6) ? 2 : 3;
            st = fp_fail(err, FP_EFORMAT, "%s: data row %d, column %d (%s): must be an integer in %s", path, h + 1, col,
                         fixed[col - 1], col == 1 ? "0..23" : col == 2 ? "0..6" : "0..1");
            power_load_series_free(s);
            goto out;
        }
        if (h > 0) {
            int phr = s->hour[h - 1], pwd = s->weekday[h - 1];
            int want_wd = hr == 0 ? (pwd + 1) % 7 : pwd;
            if (hr != (phr + 1) % 24 || wd != want_wd) {
                st = fp_fail(err, FP_EFORMAT,
                             "%s: data row %d: hour %d weekday %d does not follow hour %d weekday %d (rows must be "
                             "consecutive hours)",
                             path, h + 1, hr, wd, phr, pwd);
                power_load_series_free(s);
                goto out;
            }
        }
        s->hour[h] = (uint8_t)hr;
        s->weekday[h] = (uint8_t)wd;
        s->holiday[h] = (uint8_t)hol;
        s->temperature[h] = row[3];
        for (int z = 0; z < zones; z++) {
            if (!(row[4 + z] > 0)) {
                st = fp_fail(err, FP_EFORMAT, "%s: data row %d, column %d: load must be > 0, got %g", path, h + 1,
                             5 + z, row[4 + z]);
                power_load_series_free(s);
                goto out;
            }
            s->load[(size_t)z * H + h] = row[4 + z];
        }
    }
    *out = s;
out:
    dataset_free(d);
    return st;
}

// -- windows -------------------------------------------------------------------------------
typedef struct {
    int train_hours;       // [0, train_hours) is the training period
    double *zone_mean;     // per zone, over the training period
    double t_mean, t_sd;
} Norm;

static FpStatus split_hours(const PowerLoadSeries *s, const PowerLoadConfig *cfg, int *train_hours, FpError *err) {
    if (cfg->window < 1 || cfg->stride < 1 || !(cfg->test_fraction > 0 && cfg->test_fraction < 1))
        return fp_fail(err, FP_EPARAM, "power-load: window and stride must be >= 1 and test_fraction in (0, 1)");
    int days = s->hours / 24;
    int train_days = (int)floor(days * (1 - cfg->test_fraction));
    *train_hours = train_days * 24;
    if (*train_hours <= cfg->window || s->hours - *train_hours <= cfg->window)
        return fp_fail(err, FP_EPARAM, "power-load: %d hours are too few for windows of %d in both splits", s->hours,
                       cfg->window);
    return FP_OK;
}

static FpStatus norm_compute(const PowerLoadSeries *s, int train_hours, Norm *nm, FpError *err) {
    nm->train_hours = train_hours;
    nm->zone_mean = fp_malloc(sizeof(double) * s->zones, err);
    if (!nm->zone_mean)
        return FP_ENOMEM;
    for (int z = 0; z < s->zones; z++) {
        double sum = 0;
        for (int h = 0; h < train_hours; h++)
            sum += s->load[(size_t)z * s->hours + h];
        nm->zone_mean[z] = sum / train_hours;
    }
    double sum = 0, sq = 0;
    for (int h = 0; h < train_hours; h++)
        sum += s->temperature[h];
    nm->t_mean = sum / train_hours;
    for (int h = 0; h < train_hours; h++)
        sq += (s->temperature[h] - nm->t_mean) * (s->temperature[h] - nm->t_mean);
    nm->t_sd = sqrt(sq / train_hours);
    if (!(nm->t_sd > 0))
        nm->t_sd = 1;
    return FP_OK;
}

// The first and last hour of a split and how many windows it holds.
static int split_windows(const PowerLoadSeries *s, const PowerLoadConfig *cfg, int train_hours, int test,
                         int *first) {
    int lo = test ? train_hours : 0, hi = test ? s->hours : train_hours;
    *first = lo;
    // window [start, start+T) and target start+T, all in [lo, hi)
    int last_start = hi - 1 - cfg->window;
    return last_start < lo ? 0 : (last_start - lo) / cfg->stride + 1;
}

FpStatus power_load_windows(const PowerLoadSeries *s, const PowerLoadConfig *cfg, const char *split, Dataset **out,
                            FpError *err) {
    *out = NULL;
    int test;
    if (split && strcmp(split, "train") == 0)
        test = 0;
    else if (split && strcmp(split, "test") == 0)
        test = 1;
    else
        return fp_fail(err, FP_EPARAM, "power-load: split must be \"train\" or \"test\"");
    int train_hours = 0, first = 0;
    FP_TRY(split_hours(s, cfg, &train_hours, err));
    Norm nm = {0};
    FP_TRY(norm_compute(s, train_hours, &nm, err));
    int per = split_windows(s, cfg, train_hours, test, &first), T = cfg->window, F = POWER_LOAD_FEATURES;
    char name[64];
    snprintf(name, sizeof name, "power-load/%s (%d zones)", split, s->zones);
    Dataset *d = dataset_create(name, per * s->zones, 1, T, F, 0, 1, err);
    if (!d) {
        free(nm.zone_mean);
        return err ? err->code : FP_ENOMEM;
    }
    for (int z = 0; z < s->zones; z++) {
        const float *load = s->load + (size_t)z * s->hours;
        for (int j = 0; j < per; j++) {
            size_t i = (size_t)z * per + j;
            int start = first + j * cfg->stride;
            float *x = d->x + i * (size_t)T * F;
            for (int t = 0; t < T; t++) {
                int h = start + t, e = h + 1; // exogenous features describe the next hour
                float *f = x + (size_t)t * F;
                f[0] = (float)(load[h] / nm.zone_mean[z] - 1.0);
                f[1] = (float)((s->temperature[e] - nm.t_mean) / nm.t_sd);
                f[2] = (float)sin(TWO_PI * s->hour[e] / 24.0);
                f[3] = (float)cos(TWO_PI * s->hour[e] / 24.0);
                f[4] = (float)sin(TWO_PI * s->weekday[e] / 7.0);
                f[5] = (float)cos(TWO_PI * s->weekday[e] / 7.0);
                f[6] = (float)s->holiday[e];
            }
            d->target[i] = (float)(load[start + T] / nm.zone_mean[z]);
        }
    }
    free(nm.zone_mean);
    *out = d;
    return FP_OK;
}

static FpStatus load_series(const char *path, PowerLoadSeries **s, FpError *err) {
    if (path && path[0])
        return power_load_read_csv(path, s, err);
    PowerLoadConfig cfg = power_load_defaults();
    return power_load_generate(&cfg, s, err);
}

FpStatus power_load_open(const char *split, const char *path, Dataset **out, FpError *err) {
    *out = NULL;
    PowerLoadSeries *s = NULL;
    FP_TRY(load_series(path, &s, err));
    PowerLoadConfig cfg = power_load_defaults();
    FpStatus st = power_load_windows(s, &cfg, split, out, err);
    power_load_series_free(s);
    return st;
}

// -- partitions ---------------------------------------------------------------------------
int power_load_zones(const Dataset *d) {
    int z = 0;
    if (!d || strncmp(d->name, "power-load/", 11) != 0)
        return 0;
    const char *p = strchr(d->name, '(');
    if (!p || sscanf(p, "(%d zones)", &z) != 1 || z < 1)
        return 0;
    return z;
}

FpStatus power_load_partition(const Dataset *d, int n_clients, Partition **out, FpError *err) {
    *out = NULL;
    int zones = power_load_zones(d);
    if (!zones)
        return fp_fail(err, FP_EPARAM, "natural partition: %s is not a power-load dataset", d ? d->name : "(null)");
    if (n_clients != zones)
        return fp_fail(err, FP_EPARAM,
                       "federation.clients: the natural split of %s has one client per zone (%d), got %d clients",
                       d->name, zones, n_clients);
    if (d->n % zones != 0 || d->n / zones < 2)
        return fp_fail(err, FP_EPARAM,
                       "natural partition: %s has %d samples, not a whole number (>= 2) per zone (train_samples "
                       "cuts zones; use federation.samples_per_client instead)",
                       d->name, d->n);
    int per = d->n / zones, keep = per - per / POWER_LOAD_SERVER_EVERY;
    int *count = fp_malloc(sizeof(int) * zones, err);
    if (!count)
        return FP_ENOMEM;
    for (int z = 0; z < zones; z++)
        count[z] = keep;
    Partition *p = partition_create(zones, count, err);
    free(count);
    if (!p)
        return err ? err->code : FP_ENOMEM;
    for (int z = 0; z < zones; z++) {
        int k = 0;
        for (int j = 0; j < per; j++)
            if (j % POWER_LOAD_SERVER_EVERY != POWER_LOAD_SERVER_EVERY - 1)
                p->idx[z][k++] = (uint32_t)((size_t)z * per + j);
    }
    *out = p;
    return FP_OK;
}

FpStatus dataset_natural_partition(const Dataset *d, int n_clients, Partition **out, FpError *err) {
    if (power_load_zones(d))
        return power_load_partition(d, n_clients, out, err);
    if (d && d->client)
        return dataset_client_partition(d, n_clients, out, err);
    *out = NULL;
    return fp_fail(err, FP_EPARAM, "federation.partition: \"natural\" needs a dataset with a natural split "
                                   "(power-load: one client per zone; a client column or dataset.partition_file); "
                                   "%s has none",
                   d ? d->name : "(null)");
}

// -- the seasonal-naive reference -----------------------------------------------------------
FpStatus power_load_seasonal_naive(const char *path, int lag_hours, ForecastMetrics *out, FpError *err) {
    memset(out, 0, sizeof *out);
    if (lag_hours < 1)
        return fp_fail(err, FP_EPARAM, "seasonal naive: lag must be >= 1 hour, got %d", lag_hours);
    PowerLoadSeries *s = NULL;
    FP_TRY(load_series(path, &s, err));
    PowerLoadConfig cfg = power_load_defaults();
    int train_hours = 0, first = 0;
    Norm nm = {0};
    FpStatus st = split_hours(s, &cfg, &train_hours, err);
    if (st == FP_OK)
        st = norm_compute(s, train_hours, &nm, err);
    if (st != FP_OK) {
        power_load_series_free(s);
        return st;
    }
    int per = split_windows(s, &cfg, train_hours, 1, &first);
    double se = 0, ae = 0, ape = 0;
    for (int z = 0; z < s->zones; z++) {
        const float *load = s->load + (size_t)z * s->hours;
        for (int j = 0; j < per; j++) {
            int h = first + j * cfg.stride + cfg.window;
            if (h - lag_hours < 0)
                continue;
            double y = load[h] / nm.zone_mean[z], yhat = load[h - lag_hours] / nm.zone_mean[z], e = yhat - y;
            se += e * e;
            ae += fabs(e);
            ape += fabs(e) / fabs(y);
            out->n++;
        }
    }
    if (out->n > 0) {
        out->mse = se / out->n;
        out->mae = ae / out->n;
        out->mape = ape / out->n;
    }
    free(nm.zone_mean);
    power_load_series_free(s);
    return out->n > 0 ? FP_OK : fp_fail(err, FP_EPARAM, "seasonal naive: no test target has a lag of %d h", lag_hours);
}
