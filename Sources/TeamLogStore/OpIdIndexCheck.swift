import LMDB
import TeamLog

/// What an audit found of the opId index (`opIds`, in the log's environment): the index a re-sent op is
/// answered from (`duplicate` with its seq, or its first rejection), which no replay rebuilds.
public struct OpIdIndexReport: Sendable, Equatable {
    /// Entries in the index.
    public var entries = 0
    /// Entries of accepted ops (the rest are rejections).
    public var accepted = 0
    /// Events whose op carried an opId, over the log the audit walked.
    public var eventsWithOpId = 0
    /// The first difference between the index and the log, in words; `nil` when they agree.
    public var difference: String?
}

/// An audit's check of the opId index against the log, both ways:
/// - every event whose op carried an opId finds it in the index, accepted at the event's seq
///   (`record`, at each event the audit's chain walk reads: one lookup; the opId is read from the event's
///   header, its body is not decoded);
/// - the index holds no other accepted entry (`scan`): its accepted entries are as many as the events with
///   an opId — each of those found its own opId at its own seq, so none is left over — each names a seq of
///   the log, and every entry's outcome decodes.
///
/// A rejection is the index's alone (the log keeps no rejected op): only its form can be checked. Used by
/// one thread at a time: the chain walk's (on whichever thread walks), then the scan's, after it; an
/// audit from a base checks the events before it with a second one on another thread (`follow`).
final class OpIdIndexCheck: @unchecked Sendable {
    private let index: DatabaseHandle
    private let log: DatabaseHandle
    private(set) var eventsWithOpId = 0
    /// The first event whose opId the index does not answer with its seq.
    private var eventProblem: String?
    private var scanned: (entries: Int, accepted: Int, problem: String?)?

    init(index: DatabaseHandle, log: DatabaseHandle) {
        self.index = index
        self.log = log
    }

    /// Checks the event at `seq` (its stored payload) against the index, in `txn` (a snapshot of the log's
    /// environment, the walk's own).
    func record(seq: UInt64, payload: UnsafeRawBufferPointer, in txn: Transaction) throws {
        let opId: UnsafeRawBufferPointer?
        do { opId = try EventCodec.opIdBytes(payload) } catch {
            if eventProblem == nil { eventProblem = "event seq \(seq): its header does not decode (\(error))" }
            return
        }
        guard let opId else { return }
        eventsWithOpId += 1
        guard eventProblem == nil else { return }
        let found: OpIdOutcome?? = try txn.withValue(index, key: opId) { value in
            value.map { try? OpIdOutcomeCodec.decode($0) }
        }
        let name = Self.name(opId)
        switch found {
        case nil:
            eventProblem =
                "opId \(name) of event seq \(seq) is absent from the index: the op, sent again, would be applied again"
        case .some(nil):
            eventProblem = "opId \(name) of event seq \(seq): its index entry does not decode"
        case .accepted(let indexed)?? where indexed == seq:
            break
        case .accepted(let indexed)??:
            eventProblem = "opId \(name) of event seq \(seq): the index says seq \(indexed)"
        case .rejected(let rejection)??:
            eventProblem =
                "opId \(name) of event seq \(seq): the index says rejected (\(rejection.code.rawValue)): the op, "
                + "sent again, would be answered so"
        }
    }

    /// Takes in `earlier`, the check of the events before the first this one saw (an audit's base history,
    /// checked on another thread): its events count, and its first problem comes first.
    func follow(_ earlier: OpIdIndexCheck) {
        eventsWithOpId += earlier.eventsWithOpId
        eventProblem = earlier.eventProblem ?? eventProblem
    }

    /// Reads the whole index in `txn`: counts its entries and accepted ones, and keeps the first entry that
    /// does not decode or is accepted at a seq the log (to `headSeq`) does not have. `release` is called
    /// every `Store.releaseInterval` entries (the map's pages read so far).
    func scan(_ txn: Transaction, headSeq: UInt64, release: () -> Void) throws {
        var entries = 0
        var accepted = 0
        var problem: String?
        try txn.forEach(index) { key, value in
            entries += 1
            if UInt64(entries) % Store.releaseInterval == 0 { release() }
            switch try? OpIdOutcomeCodec.decode(value) {
            case nil:
                if problem == nil {
                    problem = "opId \(Self.name(key)): its index entry does not decode (bytes \(HashChain.hex(Array(value))))"
                }
            case .accepted(let seq)?:
                accepted += 1
                if problem == nil && (seq == 0 || seq > headSeq) {
                    problem = "opId \(Self.name(key)) is indexed at seq \(seq), which the log (to seq \(headSeq)) does not hold"
                }
            case .rejected?:
                break
            }
            return true
        }
        scanned = (entries, accepted, problem)
    }

    /// The verdict, after the walk and the scan. `wholeLog`: the walk reached the log's head in one
    /// unbroken chain (else the counts cannot be compared, and the chain's break is the audit's finding).
    /// When the counts differ with every event found, the index is read once more, each accepted entry
    /// against its event, to name one left over.
    func report(_ txn: Transaction, wholeLog: Bool) throws -> OpIdIndexReport {
        var report = OpIdIndexReport(
            entries: scanned?.entries ?? 0, accepted: scanned?.accepted ?? 0, eventsWithOpId: eventsWithOpId)
        report.difference = eventProblem ?? scanned?.problem
        if report.difference == nil && wholeLog && report.accepted != eventsWithOpId {
            report.difference = try leftOver(txn)
                ?? "\(report.accepted) accepted entries for \(eventsWithOpId) events with an opId"
        }
        return report
    }

    /// The first accepted entry whose seq's event does not carry its opId.
    private func leftOver(_ txn: Transaction) throws -> String? {
        var found: String?
        try txn.forEach(index) { key, value in
            guard case .accepted(let seq)? = try? OpIdOutcomeCodec.decode(value) else { return true }
            let carried = try Self.opId(carriedAt: seq, in: txn, log: log)
            if case let carried?? = carried, carried.elementsEqual(key) { return true }
            let what: String
            switch carried {
            case nil: what = "whose event does not decode"
            case .some(nil): what = "whose op carried no opId"
            case let other??: what = "whose op carried opId \(other.withUnsafeBytes { Self.name($0) })"
            }
            found = "opId \(Self.name(key)) is indexed at seq \(seq), \(what): that op, sent again, would be answered as a duplicate"
            return false
        }
        return found
    }

    /// The opId the event at `seq` of `log` carries: `nil` when there is no record there or it does not
    /// decode, `.some(nil)` when its op carried none.
    static func opId(carriedAt seq: UInt64, in txn: Transaction, log: DatabaseHandle) throws -> [UInt8]?? {
        try BigEndianUInt64.encoded(seq).withUnsafeBytes { key in
            try txn.withValue(log, key: key) { record in
                guard let record, let payload = LogRecord(record)?.payload else { return nil }
                return (try? EventCodec.opIdBytes(payload)).map { $0.map(Array.init) }
            }
        }
    }

    /// An opId's bytes as text (`Store.keyName`'s form: control bytes shown as `\xNN`).
    static func name(_ bytes: UnsafeRawBufferPointer) -> String {
        Store.keyName(.teams, Array(bytes))
    }
}
