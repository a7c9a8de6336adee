/// An accepted operation as stored in the log: the op with its sequence number and resolved event time.
///
/// Applying events needs no validation and no clock, so replaying the log rebuilds the same state.
public struct Event: Sendable, Equatable {
    /// Position in the log, from 1.
    public var seq: UInt64
    /// Event time in ms (never smaller than the previous event's).
    public var ts: Int64
    /// The operation as accepted.
    public var op: Op

    public init(seq: UInt64, ts: Int64, op: Op) {
        self.seq = seq
        self.ts = ts
        self.op = op
    }
}
