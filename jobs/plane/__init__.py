"""The generic Ray machinery every job that works in parts runs on: the part loop, pools, watchdog,
isolation, survey, part store, task map and the one retry policy."""
