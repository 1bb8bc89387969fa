// Power-load forecasting data (the layer-wise DP seed, Liu et al. 2025): hourly load of
// several zones, cut into sliding windows whose target is the next hour's load; one
// zone per federated client.
//
// Sources
// - Synthetic (the default, a stand-in for GEFCom2012's 20 zones × 1650 days): a seeded
//   generator with daily and weekly cycles, holidays, a shared temperature series with a
//   zone-specific asymmetric (heating/cooling) response, growth, zone-specific profile
//   skew, one flat "industrial" zone, and AR(1) noise (power_load_generate).
// - A CSV of real data in the same shape (power_load_read_csv): one row per hour, header
//       hour,weekday,holiday,temperature,<zone 1>,<zone 2>,...
//   hour 0..23, weekday 0..6 (Monday = 0), holiday 0/1, temperature in any unit (it is
//   standardised), then one column of load per zone (any names, values > 0). Rows must be
//   consecutive hours. GEFCom2012's Load_history.csv (zone_id,year,month,day,h1..h24)
//   becomes this by one row per (day, hour) and one column per zone, with the mean of
//   the 11 stations of temperature_history.csv and holiday_list.csv's dates.
//
// Samples. A window of T hours (default 24) starting at hour s gives x (T steps × 7
// features) and target load(s+T). Step t holds
//   [0] load(s+t) / m_z − 1    (m_z = zone z's mean load over the training period)
//   [1] temperature(s+t+1), standardised with the training period's mean and sd
//   [2,3] sin, cos of 2π·hour(s+t+1)/24     [4,5] sin, cos of 2π·weekday(s+t+1)/7
//   [6] holiday(s+t+1)
// so the exogenous features of the last step describe the target hour (calendar and
// temperature are known at forecast time; temperature as a perfect forecast). The target
// is load(s+T) / m_z, divided by the zone mean but not centred, so MAPE on the targets
// equals MAPE in MW.
// The split is chronological: the first 80% of days train, the rest test; window
// starts step by `stride` hours (97 by default: coprime to 24 and 168, so targets visit
// every hour and weekday). Datasets are zone-major: zone z holds samples
// [z·n/Z, (z+1)·n/Z), and the name records Z: "power-load/train (20 zones)".
//
// Feature groups for Shapley values (defenses/shapley.h): load {0}, temperature {1},
// hour {2,3}, weekday {4,5}, holiday {6}.
#ifndef FEDPRIV_DATASETS_POWER_LOAD_H
#define FEDPRIV_DATASETS_POWER_LOAD_H

#include <stdint.h>

#include "datasets/dataset.h"

#define POWER_LOAD_FEATURES 7
#define POWER_LOAD_MAX_ZONES 256
// The natural partition keeps every POWER_LOAD_SERVER_EVERY-th window of each zone
// (j % 20 == 19, 5%) out of the clients' shares: the server's evaluation set.
#define POWER_LOAD_SERVER_EVERY 20

typedef struct PowerLoadConfig {
    int zones;             // synthetic only: 20
    int days;              // synthetic only: 1650 (2004-01-01 .. 2008-07-07)
    int window;            // T input hours: 24
    int stride;            // hours between window starts: 97
    double test_fraction;  // chronological share of days for test: 0.2
    uint64_t seed;         // synthetic only: the generator's seed (2012)
} PowerLoadConfig;

PowerLoadConfig power_load_defaults(void);

// An hourly series: load[z*hours + h] (MW), and per hour the calendar and temperature.
typedef struct PowerLoadSeries {
    int zones, hours;
    float *load;
    float *temperature;
    uint8_t *hour, *weekday, *holiday;
} PowerLoadSeries;

// The synthetic series (cfg->zones, cfg->days; RNG_DATA streams of cfg->seed).
FpStatus power_load_generate(const PowerLoadConfig *cfg, PowerLoadSeries **out, FpError *err);
// A CSV as described above. Bad cells and ragged rows fail as csv_load does
// ("file:line:column: ..."); a wrong header, non-consecutive hours or a non-positive
// load fail with FP_EFORMAT naming the file, data row and column.
FpStatus power_load_read_csv(const char *path, PowerLoadSeries **out, FpError *err);
void power_load_series_free(PowerLoadSeries *s);

// Windows of one split ("train" or "test") of a series.
FpStatus power_load_windows(const PowerLoadSeries *s, const PowerLoadConfig *cfg, const char *split, Dataset **out,
                            FpError *err);

// dataset_open("power-load", split, path): path NULL → the synthetic default; else a
// CSV file as above (defaults for window, stride, test_fraction).
FpStatus power_load_open(const char *split, const char *path, Dataset **out, FpError *err);

// The zone count recorded in a power-load dataset's name; 0 if it is not one.
int power_load_zones(const Dataset *d);

// The natural split: client k = zone k (n_clients must equal the zone count), each
// client holding its zone's windows except every POWER_LOAD_SERVER_EVERY-th (the
// server's evaluation set), in chronological order. FP_EPARAM for another dataset,
// a different client count, or a dataset whose size is not zones × windows.
FpStatus power_load_partition(const Dataset *d, int n_clients, Partition **out, FpError *err);

// `"partition": "natural"` in the engine: the split a dataset brings with it (power-load's
// zones, or client ids from a client column or a partition file: dataset_client_partition;
// others fail with FP_EPARAM saying so).
FpStatus dataset_natural_partition(const Dataset *d, int n_clients, Partition **out, FpError *err);

// Forecast quality: MSE and MAE on the normalised load, MAPE (fraction) on loads.
typedef struct ForecastMetrics {
    int n;
    double mse, mae, mape;
} ForecastMetrics;

// The seasonal-naive forecast ŷ(h) = load(h − lag) on exactly the targets of the test
// windows of the series (path as in power_load_open), in the same normalisation.
// lag_hours >= 1: 24 (same hour yesterday) or 168 (same hour last week). Every test
// target has both lags inside the series (the test period starts after 80% of it).
FpStatus power_load_seasonal_naive(const char *path, int lag_hours, ForecastMetrics *out, FpError *err);

#endif
