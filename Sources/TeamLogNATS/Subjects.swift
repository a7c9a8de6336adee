public import NATS
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

    /// Creates both streams when absent (an existing stream is left as it is). The output stream
    /// de-duplicates over `outDuplicateWindowSeconds`: a partition that restarts within it re-publishes its
    /// unconfirmed outbox without duplicates downstream (docs/nats.md says what happens beyond it).
    public static func ensureStreams(
        _ js: JetStream, replicas: Int = 1, opsDuplicateWindowSeconds: Int = 120, outDuplicateWindowSeconds: Int = 600
    ) throws {
        var ops = JetStream.StreamConfig(name: opsStream, subjects: ["teamlog.ops.*"])
        ops.replicas = replicas
        ops.duplicateWindowSeconds = opsDuplicateWindowSeconds
        try js.ensureStream(ops)
        var out = JetStream.StreamConfig(name: outStream, subjects: ["teamlog.out.>"])
        out.replicas = replicas
        out.duplicateWindowSeconds = outDuplicateWindowSeconds
        try js.ensureStream(out)
    }
}
