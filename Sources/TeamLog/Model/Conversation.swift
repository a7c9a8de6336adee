/// A conversation: `{"type":"team"|"superTeam"|"p2p","id":ID}`. For `p2p` the id is the peer's user id.
public struct Conversation: Hashable, Sendable, Comparable {
    /// The conversation type.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case team, superTeam, p2p
    }

    public var kind: Kind
    public var id: Id

    public init(_ kind: Kind, _ id: Id) {
        self.kind = kind
        self.id = id
    }

    public static func < (a: Conversation, b: Conversation) -> Bool {
        (a.kind.rawValue, a.id) < (b.kind.rawValue, b.id)
    }
}
