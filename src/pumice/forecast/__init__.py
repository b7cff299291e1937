"""When will a waiting job start: the scheduling core replayed forward (see
:mod:`pumice.forecast.replay`), on end times from :mod:`pumice.forecast.ends` and run
times learned per queue (:mod:`pumice.forecast.durations`)."""

from pumice.forecast.durations import QueueDurations
from pumice.forecast.replay import ForecastStats, StartEstimate, cluster_objects, forecast_starts

__all__ = ["ForecastStats", "QueueDurations", "StartEstimate", "cluster_objects", "forecast_starts"]
