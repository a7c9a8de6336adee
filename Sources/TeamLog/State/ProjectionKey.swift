/// One stored projection record that an event changed; the store rewrites (or deletes) exactly these.
public enum ProjectionKey: Hashable, Sendable {
    /// A team's information record.
    case team(Id)
    /// One member record: team, user.
    case member(Id, Id)
    /// One invitee's pending invitations: team, invitee.
    case invite(Id, Id)
    /// One pending application: team, applicant.
    case application(Id, Id)
    /// A stored message (or the id of an unstored one).
    case message(Id)
    /// A conversation's shared record (last message).
    case conv(ConvKey)
    /// One counted broadcast in a conversation (append-only index).
    case counted(ConvKey, UInt64)
    /// One counted broadcast by its sender (append-only index): conversation, sender, seq.
    case own(ConvKey, Id, UInt64)
    /// One counted message received individually (append-only index): conversation, user, seq.
    case directed(ConvKey, Id, UInt64)
    /// One user's view of one conversation.
    case userConv(Id, ConvKey)
    /// A receipt tally.
    case receipt(Id)
    /// A user's online devices and offline time.
    case presence(Id)
    /// A signaling channel.
    case channel(Id)
    /// A user's stored offline notifications.
    case offline(Id)
}
