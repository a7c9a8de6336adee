/// A message's seq and id: what `lastMessage` shows.
public struct MessageRef: Sendable, Equatable {
    public var seq: UInt64
    public var messageId: Id

    public init(seq: UInt64, messageId: Id) {
        self.seq = seq
        self.messageId = messageId
    }
}

/// The shared state of one conversation: counters and the last message, nothing that grows with messages.
///
/// Unread counts come from the stored indexes (`counted`, `own`, `directed`), whose entries carry their
/// running ordinal within their conversation (or conversation × user): the count in a seq range is the
/// difference of two ordinals, found by two cursor seeks. Memory keeps only the running totals, which
/// `apply` uses to number the next entries.
public struct ConvState: Sendable, Equatable {
    /// Counted messages sent to every member (team broadcasts) so far: the ordinal of the last `counted` entry.
    public var countedTotal: UInt64 = 0
    /// The last stored message every member sees (broadcasts, tips; every p2p message).
    public var last: MessageRef?

    public init() {}
}

/// One user's view of one conversation.
public struct UserConv: Sendable, Equatable {
    /// Read position: messages at or before it are read.
    public var readSeq: UInt64 = 0
    /// Seq of the user's (latest) join; messages before it never count.
    public var joinSeq: UInt64 = 0
    /// Seq of the user's removal, while not a member: they stop receiving there.
    public var leaveSeq: UInt64?
    /// The last message only this user sees (directed, or the frozen last message after a removal).
    public var last: MessageRef?
    /// The user's own counted broadcasts here so far (a sender never receives their own message): the
    /// ordinal of their last `own` entry. Kept across leaves and rejoins, like the index it numbers.
    public var ownTotal: UInt64 = 0
    /// Counted messages the user received here individually so far (directed team messages, p2p): the
    /// ordinal of their last `directed` entry.
    public var directedTotal: UInt64 = 0

    public init(joinSeq: UInt64 = 0) { self.joinSeq = joinSeq }
}

/// A stored message (client messages and tips), queryable by id.
public struct StoredMessage: Sendable, Equatable {
    public var seq: UInt64
    public var ts: Int64
    public var conv: ConvKey
    public var sender: Id
    /// Client messages: the content as sent; tips: `{"type":"tip","text":…}`.
    public var content: JSONValue
    public var isTip: Bool
    /// `false` for `isPersisted: false` and status messages: only the id is kept (for `duplicateMessageId`).
    public var stored: Bool
    public var needReceipt: Bool = false
    public var directedUserIds: [Id]?
    public var hasChanged: Bool = false
    /// `modifyInfo`: who modified it and when.
    public var modifiedBy: Id?
    public var modifiedTs: Int64?

    public init(seq: UInt64, ts: Int64, conv: ConvKey, sender: Id, content: JSONValue, isTip: Bool, stored: Bool) {
        self.seq = seq
        self.ts = ts
        self.conv = conv
        self.sender = sender
        self.content = content
        self.isTip = isTip
        self.stored = stored
    }
}

/// The receipt tally of a `needReceipt` team message: read + unread = receivers, always.
public struct ReceiptState: Sendable, Equatable {
    /// Who received it (slot order at send time).
    public var receivers: [Id]
    /// Who has sent a receipt, in order.
    public var read: [Id] = []
    /// `read` as a set (derived).
    var readSet: Set<Id> = []
    /// `receivers` as a set (derived).
    var receiverSet: Set<Id>

    public init(receivers: [Id]) {
        self.receivers = receivers
        receiverSet = Set(receivers)
    }

    /// Receivers who have not sent a receipt, in receiver order.
    public var unread: [Id] { receivers.filter { !readSet.contains($0) } }

    mutating func markRead(_ user: Id) -> Bool {
        guard readSet.insert(user).inserted else { return false }
        read.append(user)
        return true
    }

    mutating func restoreRead(_ users: [Id]) {
        read = users
        readSet = Set(users)
    }

    func isReceiver(_ user: Id) -> Bool { receiverSet.contains(user) }

    public static func == (a: ReceiptState, b: ReceiptState) -> Bool { a.receivers == b.receivers && a.read == b.read }
}
