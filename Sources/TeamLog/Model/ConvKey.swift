/// The shared identity of a conversation: a team's (by team id) or a p2p pair's (both users, sorted).
/// Both sides of a p2p chat share one `ConvKey`; each sees it as `{"type":"p2p","id":<the other>}`.
public struct ConvKey: Hashable, Sendable, Comparable {
    // The id first: the kind's byte then fits in the id's tail padding (24 bytes a key, not 32: it is
    // the key of every user's conversations and a field of every resident message).
    /// Team id, or the two user ids joined by U+0001 (ids never hold control characters).
    public let id: Id
    public let kind: Conversation.Kind

    /// The hash `Dictionary` and `Set` use: `Id.bytesHash` of the id under the table's seed and the kind,
    /// instead of feeding `Hasher` (SipHash-1-3) — as `Id` does, for the same reason: the conversations
    /// table and the views are probed several times per message. Equal keys have equal bytes and kinds.
    @inlinable
    public func _rawHashValue(seed: Int) -> Int {
        let salt: UInt64 =
            switch kind {
            case .team: 0x7465_616d
            case .superTeam: 0x7375_7072
            case .p2p: 0x7032_7032
            }
        return Int(truncatingIfNeeded: Id.bytesHash(id.string, seed: UInt64(truncatingIfNeeded: seed) ^ salt))
    }

    public init(team: Id, kind: TeamKind) {
        self.kind = kind == .team ? .team : .superTeam
        id = team
    }

    public init(p2p a: Id, _ b: Id) {
        kind = .p2p
        // Byte order, so the key does not depend on which side wrote first.
        id = Id(a < b ? a.string + "\u{1}" + b.string : b.string + "\u{1}" + a.string)
    }

    /// The conversation `actor` names as `to`.
    public init(_ to: Conversation, actor: Id) {
        switch to.kind {
        case .p2p: self.init(p2p: actor, to.id)
        case .team: self.init(team: to.id, kind: .team)
        case .superTeam: self.init(team: to.id, kind: .superTeam)
        }
    }

    init(kind: Conversation.Kind, rawId: Id) {
        self.kind = kind
        id = rawId
    }

    /// The two users of a p2p conversation.
    public var pair: (Id, Id)? {
        let utf8 = id.string.utf8
        guard kind == .p2p, let sep = utf8.firstIndex(of: 1) else { return nil }
        return (Id(String(utf8[..<sep])!), Id(String(utf8[utf8.index(after: sep)...])!))
    }

    /// How `user` names this conversation.
    public func conversation(for user: Id) -> Conversation {
        if let (a, b) = pair { return Conversation(.p2p, a == user ? b : a) }
        return Conversation(kind, id)
    }

    /// Key bytes: a kind letter then the id (`t`, `s`, `p`).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1 + id.utf8.count)
        append(to: &out)
        return out
    }

    /// Appends the key bytes to `out` (building a longer key without intermediate arrays).
    @inline(__always)
    public func append(to out: inout [UInt8]) {
        let letter: UInt8 =
            switch kind {
            case .team: UInt8(ascii: "t")
            case .superTeam: UInt8(ascii: "s")
            case .p2p: UInt8(ascii: "p")
            }
        out.append(letter)
        out.append(contentsOf: id.utf8)
    }

    /// Parses `bytes`.
    public init?(bytes: some Collection<UInt8>) {
        guard let first = bytes.first else { return nil }
        let kind: Conversation.Kind
        switch first {
        case UInt8(ascii: "t"): kind = .team
        case UInt8(ascii: "s"): kind = .superTeam
        case UInt8(ascii: "p"): kind = .p2p
        default: return nil
        }
        self.init(kind: kind, rawId: Id(String(decoding: bytes.dropFirst(), as: UTF8.self)))
    }

    public static func < (a: ConvKey, b: ConvKey) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}
