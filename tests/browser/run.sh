#!/usr/bin/env bash
# Opens an HTML report in headless Chromium and checks it (tests/browser/check-report.js):
# no console errors, every image decodes, the expected text and plots are there; saves a
# screenshot. Installs Debian's chromium and nodejs first when they are missing.
#
#   bash tests/browser/run.sh REPORT.html SCREENSHOT.png [--expect-text TEXT]...
#        [--expect-selector CSS]... [--expect-count CSS N]... [--expect-in-view CSS]...
#        [--expect-fits CSS]... [--min-images N] [--min-plots N] [--width W] [--height H]
# (the layout checks are described in check-report.js)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
chromium="${CHROMIUM:-chromium}"
if ! command -v "$chromium" >/dev/null 2>&1; then
  bash "$here/../../tools/install-deps.sh" --missing chromium
fi
command -v node >/dev/null 2>&1 || bash "$here/../../tools/install-deps.sh" --missing nodejs
command -v node >/dev/null 2>&1 || { echo "browser test: node is missing (apt-get install nodejs)" >&2; exit 1; }
exec node "$here/check-report.js" "$@"
