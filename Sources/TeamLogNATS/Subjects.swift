public import NATS
public import TeamLog
import TeamLogRuntime

/// The names teamlog uses on NATS (docs/nats.md).
///
/// - `TEAMLOG_OPS`, subjects `teamlog.ops.<p>`: the ops of partition `p`, one op (one input line) per
///   message, published by `teamlog route`, consumed by `teamlog serve --nats … --partition p` with the
///   durable pull consumer `teamlog-p<p>`.
/// - `TEAMLOG_OUT`, subjects `teamlog.out.<p>.<kind>`: the SPEC §4 records partition `p` produced, one
///   record per message, `kind` = the record's kind (`event`, `rejected`, `duplicate`, `tip`, `delivery`,
///   `notice`, `signal`, `login`); `Nats-Msg-Id` = `<p>:<input stream seq>:<n>` (n: the record's index
///   among that input's records), so a re-publish after a crash is dropped by the stream.
/// - `teamlog.q.<p>.<query>`: request/reply queries answered by partition `p` (`team`, `unread`,
///   `receipts`, `message`, `channel`, `status`); the request body is the id.
public enum TeamLogSubjects {
    public static let opsStream = "TEAMLOG_OPS"
    public static let outStream = "TEAMLOG_OUT"
    /// Header carrying the router's input line number (the partition's records then name it).
    public static let lineHeader = "Teamlog-Line"
    /// Header marking a line over the limit that was not forwarded, with its length.
    public static let tooLongHeader = "Teamlog-Line-Too-Long"

    public static func ops(_ partition: Int) -> String { "teamlog.ops.\(partition)" }
    public static func out(_ partition: Int, _ kind: String) -> String { "teamlog.out.\(partition).\(kind)" }
    public static func query(_ partition: Int, _ name: String) -> String { "teamlog.q.\(partition).\(name)" }
    public static func durable(_ partition: Int) -> String { "teamlog-p\(partition)" }
    public static func outMsgId(_ partition: Int, _ position: UInt64, _ index: Int) -> String {
        "\(partition):\(position):\(index)"
    }
    /// The partition, input position and record index an `outMsgId` names (`nil` for any other text).
    public static func parseOutMsgId(_ id: String) -> (partition: Int, position: UInt64, index: Int)? {
        let parts = id.split(separator: ":")
        guard parts.count == 3, let partition = Int(parts[0]), let position = UInt64(parts[1]),
            let index = Int(parts[2])
        else { return nil }
        return (partition, position, index)
    }

    /// Creates both streams when absent (an existing stream is left as it is) and returns the
    /// deployment's partitioning: a new op stream records `PartitionScheme.current` and `partitions` in
    /// its description; an existing one's record is read and checked against `partitions` (a router or
    /// partition with another count would send keys where no partition reads them, or consume a
    /// subject no router feeds). The output stream de-duplicates over `outDuplicateWindowSeconds`: a
    /// partition that restarts within it re-publishes its unconfirmed outbox without duplicates
    /// downstream (docs/nats.md says what happens beyond it).
    @discardableResult
    public static func ensureStreams(
        _ js: JetStream, partitions: Int, replicas: Int = 1, opsDuplicateWindowSeconds: Int = 120,
        outDuplicateWindowSeconds: Int = 600
    ) throws -> Partitioning {
        var ops = JetStream.StreamConfig(name: opsStream, subjects: ["teamlog.ops.*"])
        ops.replicas = replicas
        ops.duplicateWindowSeconds = opsDuplicateWindowSeconds
        let created = Partitioning(scheme: .current, partitions: partitions)
        ops.description = created.recorded
        let partitioning: Partitioning
        if try js.ensureStream(ops) {
            partitioning = created
        } else {
            guard let existing = try self.partitioning(js) else {
                throw ClusterError("\(opsStream) vanished while it was being set up")
            }
            try existing.check(partitions: partitions)
            partitioning = existing
        }
        var out = JetStream.StreamConfig(name: outStream, subjects: ["teamlog.out.>"])
        out.replicas = replicas
        out.duplicateWindowSeconds = outDuplicateWindowSeconds
        try js.ensureStream(out)
        return partitioning
    }

    /// The partitioning the op stream records, or `nil` when there is no op stream yet.
    public static func partitioning(_ js: JetStream) throws -> Partitioning? {
        guard let state = try js.streamState(opsStream) else { return nil }
        return try Partitioning(recorded: state.description)
    }
}

/// How a deployment splits its keys: the scheme and the partition count, recorded in the op stream's
/// description when the stream is created (`teamlog ops; partitioning 2; partitions 3`). A stream made
/// before the record carries none: scheme 1, any count (as those releases did).
public struct Partitioning: Sendable, Equatable, CustomStringConvertible {
    public var scheme: PartitionScheme
    /// The recorded count; `nil` for a stream made before the record.
    public var partitions: Int?

    public init(scheme: PartitionScheme, partitions: Int?) {
        self.scheme = scheme
        self.partitions = partitions
    }

    /// Reads a stream description; one that is not teamlog's record is a stream from before it.
    public init(recorded description: String?) throws {
        let prefix = "teamlog ops;"
        guard let description, description.hasPrefix(prefix) else {
            self.init(scheme: .fnv1a, partitions: nil)
            return
        }
        var fields: [String: String] = [:]
        for part in description.dropFirst(prefix.count).split(separator: ";") {
            let words = part.split(separator: " ")
            if words.count == 2 { fields[String(words[0])] = String(words[1]) }
        }
        guard let version = fields["partitioning"].flatMap({ Int($0) }),
            let count = fields["partitions"].flatMap({ Int($0) }), count > 0
        else {
            throw ClusterError("\(TeamLogSubjects.opsStream)'s description is not a partitioning record: \(description)", permanent: true)
        }
        guard let scheme = PartitionScheme(rawValue: version) else {
            throw ClusterError(
                "\(TeamLogSubjects.opsStream) uses partitioning \(version), which this teamlog does not know "
                    + "(a newer release made the deployment): upgrade", permanent: true)
        }
        self.init(scheme: scheme, partitions: count)
    }

    /// The description a new op stream carries.
    public var recorded: String { "teamlog ops; partitioning \(scheme.rawValue); partitions \(partitions ?? 0)" }

    /// Refuses a partition count other than the recorded one.
    public func check(partitions given: Int) throws {
        guard let partitions, partitions != given else { return }
        throw ClusterError(
            "the deployment on \(TeamLogSubjects.opsStream) has \(partitions) partitions, not \(given): give "
                + "--partitions \(partitions) (changing the count moves keys: a re-partitioning is a new "
                + "deployment fed from the partitions' logs: `teamlog merge-logs`, docs/nats.md)", permanent: true)
    }

    public var description: String {
        "partitioning \(scheme)" + (partitions.map { ", \($0) partitions" } ?? " (recorded by no stream: any count)")
    }
}
