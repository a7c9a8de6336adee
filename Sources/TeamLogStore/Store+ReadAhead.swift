#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whether a store's memory maps read ahead on a page fault (`Environment.readAhead`).
///
/// `auto` (the default) turns read-ahead off while the store's files are more than twice the memory left
/// for their pages — the process's memory limit (its memory cgroup's, as in a container, or the
/// machine's) less its heap (its anonymous memory, counted as at least 2.5× `--cache-mb`) — and on again
/// when they are not: checked at open and at every checkpoint, as the files grow. Read-ahead helps while
/// the files fit (a cold start reads them in big steps: 73,206 against 55,744 ops/s for 1M ops into a
/// 5M-op store with nothing cached), and hurts once they do not: each fault then reads pages nobody asked
/// for and pushes out ones still wanted (the same ingest in a 1.5 GiB memory cgroup, the store 2.4 GB:
/// 15,815–19,474 ops/s with it, 51,738–53,604 with `auto`; BENCHMARKS, twenty-fifth session).
public enum ReadAhead: String, Sendable, CaseIterable {
    case auto, on, off

    /// `TEAMLOG_READ_AHEAD` (`auto`, `on` or `off`), else `auto`.
    public static var environmentDefault: ReadAhead {
        guard let value = getenv("TEAMLOG_READ_AHEAD") else { return .auto }
        return ReadAhead(rawValue: String(cString: value)) ?? .auto
    }
}

extension Store {
    /// Whether this store's maps read ahead now (both are set alike).
    public var readAheadIsOn: Bool { projectionEnv.readAhead }

    /// Sets both maps' read-ahead by `options.readAhead` (see `ReadAhead`); for `auto`, from the maps' used
    /// bytes (and those of `readAheadCompanionBytes`) against `memoryLimit` less the process's heap. A read
    /// of `/proc/self/statm`, and two `madvise` calls when the answer changes.
    func adjustReadAhead() {
        let on: Bool
        switch options.readAhead {
        case .on: on = true
        case .off: on = false
        case .auto:
            guard let limit = memoryLimit, let anonymous = ResidentMemory.anonymousBytes() else {
                on = true
                break
            }
            // Twice the room: the files' pages are not all wanted (old messages, old log records), and
            // read-ahead costs little until the wanted ones nearly fill it. Ingesting the `--scale` workload
            // in a 1.5 GiB memory cgroup (~0.65 GB of room beside the writer's heap), read-ahead off against
            // on: 13.15 / 10.50 s for the chunk where the files went from 1.0 to 1.45 GB, 14.04 / 12.99 s
            // from 1.45 to 1.85, 15.58 / 23.45 s from 1.85 to 2.27 (BENCHMARKS, twenty-fifth session).
            // The heap counted at least as what it grows to at the working set's budget (~2.5×: 0.65 GB at
            // 256 MiB, twenty-fourth session), not as the little a process just opened holds, which kept
            // read-ahead on for a new writer's first checkpoint interval.
            let heap = max(anonymous, options.cacheBytes * 5 / 2)
            let files = env.usedBytes + projectionEnv.usedBytes + readAheadCompanionBytes()
            on = files <= 2 * (limit - heap)
        }
        env.setReadAhead(on)
        projectionEnv.setReadAhead(on)
    }
}
