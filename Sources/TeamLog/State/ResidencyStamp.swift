/// The store's bookkeeping on a resident unit (docs/store-design.md §5): the seq of the last op whose
/// footprint named it. Not projected and not part of any answer: every stamp equals every other, so a
/// state compares (and a record encodes) as if it were not there.
///
/// Kept in the unit's own value, so one dictionary probe both tells whether a unit is resident and
/// stamps it (`World.stamp(_:seq:)`): a store-side `[ResidentKey: UInt64]` beside the state cost a second
/// probe with a costlier key for every unit of every op, and grew with every id ever named.
public struct ResidencyStamp: Sendable, Equatable {
    /// The seq of the last op naming the unit; 0 until the store first stamps it.
    public var seq: UInt64 = 0

    public init() {}

    /// Sets the stamp to `seq` and returns the one it replaces.
    @inlinable
    public mutating func mark(_ seq: UInt64) -> UInt64 {
        defer { self.seq = seq }
        return self.seq
    }

    /// Always true: the stamp is bookkeeping, not state.
    @inlinable
    public static func == (_: ResidencyStamp, _: ResidencyStamp) -> Bool { true }
}
