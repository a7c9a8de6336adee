/// The entries of the unread indexes (`counted`, `own`, `directed`) a replay applied, as ascending seq
/// lists: what `audit` compares the stored index tables with and `repair` rebuilds them from.
///
/// Not part of the resident state: the writer's `World` has none (its index entries go to disk, and it
/// keeps only the running totals), so its memory does not grow with messages. A replay that compares or
/// rebuilds whole tables keeps one, as big as those tables (8 bytes an entry), until audit and repair
/// replay into a scratch store (docs/store-design.md, step 7).
public struct IndexJournal: Sendable, Equatable {
    /// Per conversation: seqs of counted broadcasts.
    public private(set) var counted: [ConvKey: [UInt64]] = [:]
    /// Per conversation and sender: seqs of their own counted broadcasts.
    public private(set) var own: [ConvKey: [Id: [UInt64]]] = [:]
    /// Per conversation and user: seqs of counted messages received individually.
    public private(set) var directed: [ConvKey: [Id: [UInt64]]] = [:]

    public init() {}

    /// Appends an index entry `apply` made. Its ordinal must be the list's new length: the running totals
    /// of `ConvState`/`UserConv` and the index agree, checked on every replay.
    mutating func record(_ key: ProjectionKey) {
        let count: Int
        let ordinal: UInt64
        switch key {
        case .counted(let conv, let seq, let n):
            counted[conv, default: []].append(seq)
            (count, ordinal) = (counted[conv]!.count, n)
        case .own(let conv, let user, let seq, let n):
            own[conv, default: [:]][user, default: []].append(seq)
            (count, ordinal) = (own[conv]![user]!.count, n)
        case .directed(let conv, let user, let seq, let n):
            directed[conv, default: [:]][user, default: []].append(seq)
            (count, ordinal) = (directed[conv]![user]!.count, n)
        default:
            preconditionFailure("not an index key: \(key)")
        }
        precondition(UInt64(count) == ordinal, "index entry \(key): ordinal \(ordinal) but \(count) entries")
    }

    /// The ordinal of the entry `key` names (its 1-based position in its list), `nil` when there is none.
    public func ordinal(of key: ProjectionKey) -> UInt64? {
        let list: [UInt64]?
        let seq: UInt64
        switch key {
        case .counted(let conv, let s, _): (list, seq) = (counted[conv], s)
        case .own(let conv, let user, let s, _): (list, seq) = (own[conv]?[user], s)
        case .directed(let conv, let user, let s, _): (list, seq) = (directed[conv]?[user], s)
        default: return nil
        }
        guard let list else { return nil }
        let n = list.countAtOrBelow(seq)
        return n > 0 && list[n - 1] == seq ? UInt64(n) : nil
    }

    /// Every entry's key, with its ordinal.
    public var keys: [ProjectionKey] {
        var keys: [ProjectionKey] = []
        for (conv, seqs) in counted {
            keys += seqs.enumerated().map { .counted(conv, $0.element, ordinal: UInt64($0.offset + 1)) }
        }
        for (conv, users) in own {
            for (user, seqs) in users {
                keys += seqs.enumerated().map { .own(conv, user, $0.element, ordinal: UInt64($0.offset + 1)) }
            }
        }
        for (conv, users) in directed {
            for (user, seqs) in users {
                keys += seqs.enumerated().map { .directed(conv, user, $0.element, ordinal: UInt64($0.offset + 1)) }
            }
        }
        return keys
    }

    /// Entries per index table.
    public var counts: (counted: Int, own: Int, directed: Int) {
        (
            counted.values.reduce(0) { $0 + $1.count },
            own.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } },
            directed.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } }
        )
    }
}

extension Array where Element == UInt64 {
    /// Number of elements ≤ `x` in an ascending array.
    @inline(__always)
    func countAtOrBelow(_ x: UInt64) -> Int {
        var lo = 0
        var hi = count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if self[mid] <= x { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}
