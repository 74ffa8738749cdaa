"""The statistics of the project, in one room: estimators, intervals, paired and sequential tests,
variance splits and minimum detectable effects, used by report, leaderboard, adaptive runs, sweeps and replay."""
