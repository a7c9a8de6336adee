/// One stored projection record that an event changed; the store rewrites (or deletes) exactly these.
public enum ProjectionKey: Hashable, Sendable {
    /// A team's information record.
    case team(String)
    /// One member record: team, user.
    case member(String, String)
    /// One invitee's pending invitations: team, invitee.
    case invite(String, String)
    /// One pending application: team, applicant.
    case application(String, String)
    /// A stored message (or the id of an unstored one).
    case message(String)
    /// A conversation's shared record (last message).
    case conv(ConvKey)
    /// One counted broadcast in a conversation (append-only index).
    case counted(ConvKey, UInt64)
    /// One counted broadcast by its sender (append-only index): conversation, sender, seq.
    case own(ConvKey, String, UInt64)
    /// One counted message received individually (append-only index): conversation, user, seq.
    case directed(ConvKey, String, UInt64)
    /// One user's view of one conversation.
    case userConv(String, ConvKey)
    /// A receipt tally.
    case receipt(String)
    /// A user's online devices and offline time.
    case presence(String)
    /// A signaling channel.
    case channel(String)
    /// A user's stored offline notifications.
    case offline(String)
}
