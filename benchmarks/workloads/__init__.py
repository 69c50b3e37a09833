"""Programs the benchmarked ranks run. Each is also run as a plain script (by path), so they
import nothing from distrun or the benchmarks package except their sibling modules."""
