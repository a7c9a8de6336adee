import TeamLogThreads
import LMDB
import TeamLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One batch, encoded and ready to write: everything its write transaction puts, computed on the
/// store's thread so the committer never reads the (changing) in-memory state.
///
/// (Encoding on the committer from a copy-on-write copy of the state was tried: fewer instructions on
/// the store's thread, but the copies the next batch's changes then made cost as much as they saved.)
final class CommitJob: @unchecked Sendable {
    /// Encoded events; `chain` appends each one's hash.
    private(set) var events: [(seq: UInt64, value: [UInt8])]
    private(set) var opIds: [Id: OpIdOutcome]
    private(set) var changes: [(ProjectionTable, [UInt8], [UInt8]?)]
    /// The checkpoint; its `lastHash` is the chain's hash after the batch once `chain` ran.
    private(set) var checkpoint: Meta
    private var chained = false
    /// Set by the committer when the transaction failed.
    var error: (any Error)?
    var done = false

    init(
        events: [(seq: UInt64, value: [UInt8])], opIds: [Id: OpIdOutcome],
        changes: [(ProjectionTable, [UInt8], [UInt8]?)], previousHash: [UInt8], lastSeq: UInt64, lastTs: Int64
    ) {
        self.events = events
        self.opIds = opIds
        self.changes = changes
        self.checkpoint = Meta(lastSeq: lastSeq, lastTs: lastTs, lastHash: previousHash, config: nil)
    }

    /// Appends to every event the hash chained on the one before it (off the store's thread: SHA-256
    /// was a sixteenth of its work). Jobs run one at a time in seq order, so the chain is the same as
    /// hashing at submit.
    private func chain() {
        guard !chained else { return }
        var hash = checkpoint.lastHash
        for i in events.indices {
            hash = events[i].value.withUnsafeBytes {
                HashChain.next(previous: hash, seq: events[i].seq, payload: $0)
            }
            events[i].value.append(contentsOf: hash)
        }
        checkpoint.lastHash = hash
        chained = true
    }

    /// Encodes the projection records `state` marks as changed: table, key and value (`nil`: delete).
    static func changes(of state: World) -> [(ProjectionTable, [UInt8], [UInt8]?)] {
        var changes: [(ProjectionTable, [UInt8], [UInt8]?)] = []
        changes.reserveCapacity(state.dirty.count + state.appended.count)
        for key in state.dirty { changes.append(ProjectionCodec.record(key, in: state)) }
        for key in state.appended { changes.append(ProjectionCodec.record(key, in: state)) }
        return changes
    }

    /// The batch's one write transaction: events, opId index, changed projections, checkpoint.
    func write(env: Environment, dbs: Databases) throws {
        chain()
        try env.write { txn in
            for (seq, value) in events {
                try txn.put(dbs.log.handle, key: BigEndianUInt64.encoded(seq), value: value, flags: .append)
            }
            for (opId, outcome) in opIds {
                try txn.put(dbs.opIds, opId, outcome, flags: .noOverwrite)
            }
            for (table, key, value) in changes {
                let db = dbs.projection(table)
                if let value { try txn.put(db, key: key, value: value) } else { try txn.delete(db, key: key) }
            }
            try dbs.writeCheckpoint(txn, checkpoint)
        }
    }

    /// Frees the written records (hundreds of thousands of small arrays in a big batch) on the thread
    /// that wrote them: freeing them on the store's thread was a sixth of its work.
    func dropRecords() {
        events = []
        opIds = [:]
        changes = []
    }
}

/// A thread that runs write transactions handed to it, one at a time, so the store's thread can decide
/// and apply the next batch while the previous one is written and fsynced. It is still the one writer
/// of the environment: the store hands over at most one batch and waits for it before the next.
final class Committer: @unchecked Sendable {
    private let env: Environment
    private let dbs: Databases
    private let monitor = Monitor()
    private var job: CommitJob?
    private var stopping = false
    private var thread: JoinableThread?

    /// `nil` when no thread can be started (the store then commits in place).
    init?(env: Environment, dbs: Databases) {
        self.env = env
        self.dbs = dbs
        guard let started = startThread({ self.loop() }) else { return nil }
        thread = started
    }

    private func loop() {
        while let current = monitor.locked({ () -> CommitJob? in
            monitor.wait { job != nil || stopping }
            return job
        }) {
            var failure: (any Error)?
            do { try current.write(env: env, dbs: dbs) } catch { failure = error }
            current.dropRecords()
            monitor.locked {
                current.error = failure
                current.done = true
                job = nil
                monitor.broadcast()
            }
        }
    }

    /// Starts writing `job` (the previous one must be finished).
    func start(_ job: CommitJob) {
        monitor.locked {
            precondition(self.job == nil, "one batch in flight at a time")
            self.job = job
            monitor.broadcast()
        }
    }

    /// Waits until `job` is written (or failed).
    func wait(_ job: CommitJob) {
        monitor.locked { monitor.wait { job.done } }
    }

    /// Ends the thread after the job in flight, if any.
    func stop() {
        monitor.locked {
            stopping = true
            monitor.broadcast()
        }
        thread?.join()
        thread = nil
    }
}
