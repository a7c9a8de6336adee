public import NATS
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#endif

/// The right to serve one partition: a key (`partition-<p>`) in the JetStream key-value bucket
/// `TEAMLOG_LEASES`, taken by a compare-and-set write and kept by renewing it.
///
/// One process per partition is what keeps a partition's store the only consumer of its stream: a second
/// one would delete and recreate the durable consumer under the first, and each store would apply part
/// of the stream. Asking the partition's status subject first catches a running instance, but two
/// starting together can both find none; the lease cannot be taken twice, because the server accepts
/// `create` only on an empty key and `update` only at the revision the writer read.
///
/// - **Taking it.** An empty key, or one its holder released (a clean stop), is taken at once. So is one
///   whose holder was a process of this machine that is gone (same host, boot and pid namespace; no such
///   pid, or a pid started at another time): a restart after kill -9 does not wait. Any other holder is
///   live while it renews: the taker watches the key, refuses as soon as its revision moves, and takes it
///   (at the revision it watched) once the holder's own TTL passed without a renewal.
/// - **Keeping it.** The holder renews every TTL/3. It counts the lease valid until TTL − TTL/5 after the
///   *sending* of its last successful renewal (a monotonic clock, so a process stopped meanwhile sees it
///   lapsed when it wakes), and fetches nothing while it is not valid. A renewal that finds the key
///   changed means another process took it: the holder stops. One that finds the key gone (an operator
///   deleted it) takes it again, and the worker seeks again before fetching (`epoch`).
/// - **Giving it up.** A stop writes the holder's record back marked released (at its revision), so the
///   next instance starts at once.
public final class PartitionLease: @unchecked Sendable {
    /// Who holds a lease, as its record says.
    public struct Holder: Sendable, Equatable, CustomStringConvertible {
        public var pid: Int32
        public var host: String
        /// `/proc/sys/kernel/random/boot_id`: a pid on the same host means the same process only within one boot.
        public var bootId: String
        /// `/proc/self/ns/pid`: pids mean the same only within one namespace (containers).
        public var pidNamespace: String
        /// The process's start time (`/proc/<pid>/stat`, clock ticks since boot): tells a reused pid.
        public var processStart: UInt64
        /// How long the holder's renewals may be apart before it is taken as gone.
        public var ttlMs: Int
        /// The holder's wall clock when it took the lease (for people; nothing compares it).
        public var sinceMs: Int64
        /// Written by a clean stop: free to take.
        public var released = false

        /// This process as a holder.
        static func thisProcess(ttlMs: Int) -> Holder {
            let pid = getpid()
            return Holder(
                pid: pid, host: Self.hostName(), bootId: Self.firstLine("/proc/sys/kernel/random/boot_id") ?? "",
                pidNamespace: Self.link("/proc/self/ns/pid") ?? "", processStart: Self.startTime(pid) ?? 0,
                ttlMs: ttlMs, sinceMs: Processor.wallClock())
        }

        public var description: String { "pid \(pid) on host \(host)" }

        /// How long after its last renewal another process takes the lease over: its TTL and a fifth.
        public var takeoverMs: Int { ttlMs + ttlMs / 5 }

        var json: [UInt8] {
            var w = JSONWriter()
            w.write(
                .object([
                    ("pid", .int(Int64(pid))), ("host", .string(host)), ("bootId", .string(bootId)),
                    ("pidNamespace", .string(pidNamespace)), ("processStart", .int(Int64(processStart))),
                    ("ttlMs", .int(Int64(ttlMs))), ("sinceMs", .int(sinceMs)), ("released", .bool(released)),
                ]))
            return w.bytes
        }

        init(
            pid: Int32, host: String, bootId: String, pidNamespace: String, processStart: UInt64, ttlMs: Int,
            sinceMs: Int64, released: Bool = false
        ) {
            self.pid = pid
            self.host = host
            self.bootId = bootId
            self.pidNamespace = pidNamespace
            self.processStart = processStart
            self.ttlMs = ttlMs
            self.sinceMs = sinceMs
            self.released = released
        }

        /// A record as stored; nil when it is not one (then it is treated as a live holder with the taker's TTL).
        init?(json bytes: [UInt8]) {
            guard let value = try? JSONParser.parse(bytes), let pid = value["pid"]?.intValue,
                let host = value["host"]?.stringValue, let ttl = value["ttlMs"]?.intValue
            else { return nil }
            self.init(
                pid: Int32(truncatingIfNeeded: pid), host: host, bootId: value["bootId"]?.stringValue ?? "",
                pidNamespace: value["pidNamespace"]?.stringValue ?? "",
                processStart: UInt64(max(0, value["processStart"]?.intValue ?? 0)), ttlMs: Int(max(1, ttl)),
                sinceMs: value["sinceMs"]?.intValue ?? 0, released: value["released"]?.boolValue ?? false)
        }

        /// Whether both name the same process (a write whose answer was lost is found to be one's own).
        func isSameProcess(as other: Holder) -> Bool {
            pid == other.pid && host == other.host && bootId == other.bootId && pidNamespace == other.pidNamespace
                && processStart == other.processStart
        }

        /// Whether both name processes of one machine, whose pids mean the same: host, boot and pid namespace.
        func isOnSameMachine(as other: Holder) -> Bool {
            host == other.host && bootId == other.bootId && pidNamespace == other.pidNamespace
        }

        /// Whether it names a process of this machine (host, boot, pid namespace) that no longer runs.
        var isGoneFromThisMachine: Bool {
            let me = Holder.thisProcess(ttlMs: ttlMs)
            guard !bootId.isEmpty, !pidNamespace.isEmpty, isOnSameMachine(as: me) else { return false }
            if pid == me.pid { return processStart != me.processStart }
            guard let started = Self.startTime(pid) else { return true }  // no such process
            return started != processStart
        }

        private static func hostName() -> String {
            var buffer = [CChar](repeating: 0, count: 256)
            guard gethostname(&buffer, buffer.count - 1) == 0 else { return "?" }
            return String(cString: buffer)
        }

        private static func firstLine(_ path: String) -> String? {
            guard let file = fopen(path, "r") else { return nil }
            defer { fclose(file) }
            var buffer = [CChar](repeating: 0, count: 512)
            guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
            return String(cString: buffer).trimmingWhitespace
        }

        private static func link(_ path: String) -> String? {
            var buffer = [CChar](repeating: 0, count: 256)
            let n = readlink(path, &buffer, buffer.count - 1)
            guard n > 0 else { return nil }
            return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }

        /// Field 22 of `/proc/<pid>/stat`, counted after the command name's closing parenthesis; nil when
        /// there is no such process or it is a zombie (dead, not yet reaped by its parent: a container
        /// whose pid 1 does not reap kept a killed holder "running" for a minute, an operator's trial).
        static func startTime(_ pid: Int32) -> UInt64? {
            guard let line = firstLine("/proc/\(pid)/stat"), let close = line.lastIndex(of: ")") else { return nil }
            let fields = line[line.index(after: close)...].split(separator: " ")
            // After ")": state is field 3 (index 0), so field 22 is index 19.
            guard fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return nil }
            return UInt64(fields[19])
        }
    }

    /// How `acquire` ended when it did not take the lease.
    public enum Refusal: Error, Sendable {
        /// A live process holds it (it renewed while watched, or it runs on this machine).
        case held(by: Holder?)
        /// `shouldStop` said so while waiting.
        case stopped
    }

    /// What a renewal found.
    public enum Renewal: Sendable, Equatable {
        /// Still this process's.
        case renewed
        /// The key was gone (deleted by hand) and is this process's again: seek again before fetching.
        case retaken
        /// Another process holds it now.
        case lost(to: Holder?)
        /// NATS did not answer; tried again later (the lease lapses meanwhile).
        case unreachable(String)
    }

    /// The bucket of every partition's lease.
    public static let bucket = "TEAMLOG_LEASES"
    /// A partition's key in the bucket.
    public static func key(_ partition: Int) -> String { "partition-\(partition)" }

    public let partition: Int
    public let ttlMs: Int
    private let kv: KeyValue
    private let me: Holder
    private let key: String
    private let monitor = Monitor()
    private var revision: UInt64?
    private var validUntilMs: Int64 = 0
    private var _epoch = 0

    /// The lease of `partition` in the bucket (created when absent), for this process with `ttlMs`.
    public convenience init(js: JetStream, partition: Int, ttlMs: Int, replicas: Int) throws {
        try self.init(js: js, partition: partition, ttlMs: ttlMs, replicas: replicas, holder: nil)
    }

    /// As above, holding as `holder` instead of this process (tests: two "processes" in one).
    init(js: JetStream, partition: Int, ttlMs: Int, replicas: Int, holder: Holder?) throws {
        var config = KeyValue.Config(bucket: Self.bucket)
        config.description = "teamlog: which process serves each partition (docs/nats.md, The lease)"
        config.replicas = replicas
        kv = try js.keyValue(config)
        self.partition = partition
        self.ttlMs = max(300, ttlMs)
        me = holder ?? .thisProcess(ttlMs: self.ttlMs)
        key = Self.key(partition)
    }

    /// The holder the bucket names now and when its record was last written (the server's clock, ns since
    /// the epoch); nil: nobody, or released.
    public static func holding(_ kv: KeyValue, partition: Int) throws -> (holder: Holder, writtenNs: Int64)? {
        guard let entry = try kv.get(key(partition)), let holder = Holder(json: entry.value), !holder.released
        else { return nil }
        return (holder, entry.createdNs)
    }

    /// The holder the bucket names now (nil: nobody, or released).
    public static func holder(in kv: KeyValue, partition: Int) throws -> Holder? {
        try holding(kv, partition: partition)?.holder
    }

    /// Whether this process may fetch now: it holds the lease and its last renewal is recent enough.
    public var isValid: Bool { monitor.locked { revision != nil && MonotonicClock.milliseconds() < validUntilMs } }

    /// How many times this process took the lease (a take after a loss of the key means: seek again).
    public var epoch: Int { monitor.locked { _epoch } }

    /// Takes the lease, waiting out a holder that stopped renewing (at most its TTL and a fifth). Throws
    /// `Refusal.held` when a live process holds it, `Refusal.stopped` when `shouldStop` says so, and NATS
    /// errors. `waiting` is told once, when it starts to wait.
    public func acquire(shouldStop: () -> Bool = { false }, waiting: (Holder?, Int) -> Void = { _, _ in }) throws {
        var watched: (revision: UInt64, sinceMs: Int64)?
        var said = false
        while true {
            if shouldStop() { throw Refusal.stopped }
            let sent = MonotonicClock.milliseconds()
            guard let entry = try kv.get(key) else {
                if let revision = try kv.create(key, me.json) { return took(revision, sent: sent) }
                continue  // another was first: look again
            }
            let holder = Holder(json: entry.value)
            if holder?.released == true || holder?.isGoneFromThisMachine == true
                || holder?.isSameProcess(as: me) == true
            {
                if let revision = try kv.update(key, me.json, last: entry.revision) { return took(revision, sent: sent) }
                continue
            }
            if let holder, holder.isOnSameMachine(as: me) {
                throw Refusal.held(by: holder)  // a process of this machine that runs
            }
            let takeover = holder?.takeoverMs ?? (ttlMs + ttlMs / 5)
            if let watched, watched.revision != entry.revision { throw Refusal.held(by: holder) }  // it renewed
            if let watched, sent - watched.sinceMs > Int64(takeover) {
                // No renewal for longer than its TTL: its holder cannot be fetching any more.
                if let revision = try kv.update(key, me.json, last: entry.revision) { return took(revision, sent: sent) }
                continue
            }
            if watched == nil { watched = (entry.revision, sent) }
            if !said {
                said = true
                waiting(holder, takeover)
            }
            usleep(UInt32(min(200, max(20, takeover / 12))) * 1_000)
        }
    }

    private func took(_ revision: UInt64, sent: Int64) {
        holds(revision, sent: sent)
        monitor.locked { _epoch += 1 }
    }

    /// This process holds `revision`, written by a request sent at `sent` (monotonic ms): valid until a
    /// fifth of the TTL before it could be taken over.
    private func holds(_ revision: UInt64, sent: Int64) {
        monitor.locked {
            self.revision = revision
            validUntilMs = sent + Int64(ttlMs - ttlMs / 5)
        }
    }

    /// Renews the lease (the worker calls it every TTL/3).
    public func renew() -> Renewal {
        guard let last = monitor.locked({ revision }) else { return .lost(to: nil) }
        let sent = MonotonicClock.milliseconds()
        do {
            if let next = try kv.update(key, me.json, last: last) {
                holds(next, sent: sent)
                return .renewed
            }
            guard let entry = try kv.get(key) else {
                if let again = try kv.create(key, me.json) {
                    took(again, sent: sent)
                    return .retaken
                }
                return .lost(to: try? Self.holder(in: kv, partition: partition))
            }
            let holder = Holder(json: entry.value)
            if let holder, holder.isSameProcess(as: me), !holder.released {
                // An earlier renewal was stored but its answer lost: the record is this process's.
                monitor.locked { revision = entry.revision }
                return renew()
            }
            monitor.locked { revision = nil }
            return .lost(to: holder)
        } catch {
            return .unreachable("\(error)")
        }
    }

    /// Gives the lease up (marks the record released, only if it is still this process's).
    public func release() {
        guard let last = monitor.locked({ revision }) else { return }
        var record = me
        record.released = true
        _ = try? kv.update(key, record.json, last: last)
        monitor.locked { revision = nil }
    }
}
