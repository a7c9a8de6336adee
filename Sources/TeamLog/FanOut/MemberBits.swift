/// The per-member attributes the fan-out rule reads, one bit per member slot, 64 slots a word.
///
/// Kept up to date by `TeamState` on every roster, role, notify and online change, so deciding a
/// message is a handful of word-wise operations per 64 members instead of a lookup per member.
public struct MemberBits: Sendable, Equatable {
    /// Slots holding a member.
    public var present: [UInt64] = []
    /// Owner and managers.
    public var admins: [UInt64] = []
    /// Notify state `none`.
    public var notifyNone: [UInt64] = []
    /// Notify state `managerOnly`.
    public var notifyManagerOnly: [UInt64] = []
    /// Members with at least one online device.
    public var online: [UInt64] = []

    public init() {}

    /// Words in use.
    public var wordCount: Int { present.count }

    mutating func ensure(words: Int) {
        while present.count < words {
            present.append(0)
            admins.append(0)
            notifyNone.append(0)
            notifyManagerOnly.append(0)
            online.append(0)
        }
    }

    /// Makes room for `words` words in every bitset (nothing is set).
    mutating func reserve(words: Int) {
        present.reserveCapacity(words)
        admins.reserveCapacity(words)
        notifyNone.reserveCapacity(words)
        notifyManagerOnly.reserveCapacity(words)
        online.reserveCapacity(words)
    }

    mutating func trim(words: Int) {
        let drop = present.count - words
        guard drop > 0 else { return }
        present.removeLast(drop)
        admins.removeLast(drop)
        notifyNone.removeLast(drop)
        notifyManagerOnly.removeLast(drop)
        online.removeLast(drop)
    }

    @inline(__always)
    public static func set(_ words: inout [UInt64], _ slot: Int, _ on: Bool) {
        let bit: UInt64 = 1 << UInt64(slot & 63)
        if on { words[slot >> 6] |= bit } else { words[slot >> 6] &= ~bit }
    }

    @inline(__always)
    public static func test(_ words: [UInt64], _ slot: Int) -> Bool {
        let w = slot >> 6
        return w < words.count && words[w] & (1 << UInt64(slot & 63)) != 0
    }

    /// Sets every attribute bit of `slot` from a member record (or clears them for an empty slot).
    ///
    /// The record's fields are read once, by a `switch`: each optional chain on `member` (`member?.role`,
    /// `member?.notify`, and `member != nil` twice) copied the optional record out and destroyed it again,
    /// two thirds of the call's instructions (callgrind: ~800 a call, run for every member a join adds).
    @inline(__always)
    mutating func refresh(_ slot: Int, _ member: Member?, online isOnline: Bool) {
        switch member {
        case .some(let m): refresh(slot, present: true, admin: m.role.isAdmin, notify: m.notify, online: isOnline)
        case .none: refresh(slot, present: false, admin: false, notify: .all, online: false)
        }
    }

    /// Sets every attribute bit of `slot`: a member (`present`) with these role, alert mode and online
    /// state, or an empty slot (`present` false: every bit cleared).
    mutating func refresh(_ slot: Int, present isPresent: Bool, admin: Bool, notify: NotifyState, online isOnline: Bool)
    {
        ensure(words: slot / 64 + 1)
        Self.set(&present, slot, isPresent)
        Self.set(&admins, slot, isPresent && admin)
        Self.set(&notifyNone, slot, isPresent && notify == .none)
        Self.set(&notifyManagerOnly, slot, isPresent && notify == .managerOnly)
        Self.set(&online, slot, isPresent && isOnline)
    }

    /// Number of set bits.
    public static func count(_ words: [UInt64]) -> Int { words.reduce(0) { $0 + $1.nonzeroBitCount } }

    /// Calls `body` with every set slot in ascending order.
    @inline(__always)
    public static func forEachSlot(_ words: [UInt64], _ body: (Int) -> Void) {
        for (w, word) in words.enumerated() {
            var bits = word
            while bits != 0 {
                body(w << 6 | bits.trailingZeroBitCount)
                bits &= bits &- 1
            }
        }
    }
}
