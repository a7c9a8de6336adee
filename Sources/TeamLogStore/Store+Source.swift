import LMDB

/// A store fed from an external stream (a JetStream consumer, `teamlog serve --nats`) keeps its place in
/// that stream, and the records it owes downstream, in its own log transaction: exactly once from stream
/// to store to stream.
///
/// - **Position.** `stageSource(position:…)` names the stream sequence the pending ops were consumed
///   through; the next commit writes it to `meta.source` in the same transaction as their events and
///   opIds. After a crash `sourcePosition` is exactly the last input whose effects are in the log, so the
///   consumer skips every redelivery at or below it and processes everything after it.
/// - **Outbox.** The records an input produced are staged with it (keyed by its stream sequence) and
///   written in that transaction too; they are deleted by a later commit once their publish is confirmed
///   (`stagePublished`). Whatever is still in the outbox at open was committed but maybe not published:
///   the transport publishes it again under the same message ids, and the downstream stream drops the
///   copies it already has. Records are therefore never lost (they are durable before they are sent) and
///   never duplicated downstream (deterministic ids).
extension Store {
    /// Names `position` as the source position the pending ops reach, and stages `outbox` entries
    /// (source position → encoded records) to write with them in the next commit.
    public func stageSource(position: UInt64, outbox: [(UInt64, [UInt8])]) {
        pendingSource.position = max(pendingSource.position ?? 0, position)
        pendingSource.outbox += outbox
    }

    /// Stages the deletion of outbox entries whose publish was confirmed (written with the next commit,
    /// or at once by `commitPublished` when nothing else is pending).
    public func stagePublished(_ positions: [UInt64]) {
        pendingSource.published += positions
    }

    /// Whether something staged waits for a commit.
    public var hasStagedSource: Bool { !pendingSource.isEmpty }

    /// How many committed outbox entries there are (published or not, until their deletion commits): one
    /// `mdb_stat`, whatever the outbox holds. Safe on any thread.
    public func outboxCount() throws -> Int {
        guard let outbox = dbs.outbox else { return 0 }
        return Int(try env.stat(outbox.handle).entries)
    }

    /// The committed outbox entries after `position`, in order: records committed but not (known to be)
    /// published. Safe on any thread (one read snapshot of the log).
    public func outboxEntries(after position: UInt64 = 0, limit: Int = .max) throws -> [(UInt64, [UInt8])] {
        guard let outbox = dbs.outbox else { return [] }
        var entries: [(UInt64, [UInt8])] = []
        try env.read { txn in
            try txn.forEach(outbox.handle, from: BigEndianUInt64.encoded(position + 1)) { key, value in
                guard entries.count < limit else { return false }
                entries.append((try BigEndianUInt64.decode(key), Array(value)))
                return true
            }
        }
        return entries
    }
}
