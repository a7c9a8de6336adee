#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A monotonic clock for intervals (group-commit deadlines, checkpoint intervals, progress, timings);
/// never for event time, which comes from the events.
public enum MonotonicClock {
    /// Nanoseconds since an arbitrary fixed point.
    public static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Milliseconds since an arbitrary fixed point.
    public static func milliseconds() -> Int64 { nanoseconds() / 1_000_000 }

    /// Seconds since an arbitrary fixed point.
    public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}
