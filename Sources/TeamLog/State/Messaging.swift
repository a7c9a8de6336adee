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
    /// The store's residency stamp (`ResidencyStamp`: not state, equal in every value).
    public var stamp = ResidencyStamp()

    public init() {}
}

/// One user's view of one conversation.
public struct UserConv: Sendable, Equatable {
    // Stored so that no field pads another (80 bytes, not 88: one of these per user and conversation).
    /// Read position: messages at or before it are read.
    public var readSeq: UInt64 = 0
    /// Seq of the user's (latest) join; messages before it never count.
    public var joinSeq: UInt64 = 0
    /// The user's own counted broadcasts here so far (a sender never receives their own message): the
    /// ordinal of their last `own` entry. Kept across leaves and rejoins, like the index it numbers.
    public var ownTotal: UInt64 = 0
    /// Counted messages the user received here individually so far (directed team messages, p2p): the
    /// ordinal of their last `directed` entry.
    public var directedTotal: UInt64 = 0
    /// `ownTotal` and `directedTotal` hold `UserConv.unknownTotal` in a view the store loaded without
    /// them (two index seeks it skips unless a `message.send` will number entries from them: see
    /// `Op.numbersViews`); `false` only there.
    public var hasTotals: Bool { ownTotal != Self.unknownTotal }
    /// The totals of a view loaded without them.
    public static let unknownTotal = UInt64.max
    /// The store's residency stamp (`ResidencyStamp`: not state, equal in every value).
    public var stamp = ResidencyStamp()
    /// `leaveSeq`, 0 for none (seqs start at 1, so no leave is at 0): an optional would take 16 bytes.
    private var leaveSeqOrZero: UInt64 = 0
    /// The last message only this user sees (directed, or the frozen last message after a removal).
    public var last: MessageRef?

    /// Seq of the user's removal, while not a member: they stop receiving there.
    public var leaveSeq: UInt64? {
        get { leaveSeqOrZero == 0 ? nil : leaveSeqOrZero }
        set { leaveSeqOrZero = newValue ?? 0 }
    }

    public init(joinSeq: UInt64 = 0) { self.joinSeq = joinSeq }
}

/// A stored message (client messages and tips), queryable by id.
public struct StoredMessage: Sendable, Equatable {
    // Word-sized fields first and the flags last, so that fewer fields pad the next one.
    public var seq: UInt64
    public var ts: Int64
    /// The store's residency stamp (`ResidencyStamp`: not state, equal in every value).
    public var stamp = ResidencyStamp()
    public var directedUserIds: [Id]?
    /// `modifyInfo`: who modified it and when.
    public var modifiedTs: Int64?
    /// Client messages: the content as sent; tips: `{"type":"tip","text":…}`.
    public var content: JSONValue
    public var conv: ConvKey
    public var sender: Id
    public var modifiedBy: Id?
    public var isTip: Bool
    /// `false` for `isPersisted: false` and status messages: only the id is kept (for `duplicateMessageId`).
    public var stored: Bool
    public var needReceipt: Bool = false
    public var hasChanged: Bool = false

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
///
/// The receivers are not listed (a 200,000-member supergroup message would store 200,000 ids): a
/// broadcast's receivers are the members at its seq but the sender, found from the roster and its ended
/// memberships (`TeamState.members(at:)`); only a directed message, whose receivers are few, keeps them.
/// So a message stores O(1) bytes (or its directed list) and a receipt one index entry plus the count.
///
/// The readers are a cache: a tally this state made (or one without receipts) knows all of them
/// (`complete`); a tally loaded from the store knows only the readers looked up since, and the store
/// looks up a reader before a receipt from them is decided (`World.footprint(of:)`).
public struct ReceiptState: Sendable, Equatable {
    /// How many received it.
    public var receiverCount: Int
    /// A directed message's receivers (slot order at send time); `nil` for a broadcast.
    public var directedReceivers: [Id]?
    /// How many receipts were sent (each reader once).
    public private(set) var readCount: Int = 0
    /// Known readers and each one's 1-based position in receipt order.
    public private(set) var readers: [Id: UInt64] = [:]
    /// Whether `readers` holds every reader.
    public private(set) var complete: Bool = true
    /// The store's residency stamp (`ResidencyStamp`: not state, equal in every value).
    public var stamp = ResidencyStamp()

    public init(receiverCount: Int, directedReceivers: [Id]?) {
        self.receiverCount = receiverCount
        self.directedReceivers = directedReceivers
    }

    /// A tally as stored: its counts, with no reader known yet (all known when there are none).
    public init(receiverCount: Int, directedReceivers: [Id]?, readCount: Int) {
        self.receiverCount = receiverCount
        self.directedReceivers = directedReceivers
        self.readCount = readCount
        self.complete = readCount == 0
    }

    /// Receivers who have not sent a receipt.
    public var unreadCount: Int { receiverCount - readCount }

    /// Whether it is known whether `user` sent a receipt (always for a complete tally).
    public func knowsReader(_ user: Id) -> Bool { complete || readers[user] != nil }

    /// The receipt's ordinal when `user` had not sent one yet; `nil` for a repeat (which counts once).
    /// The caller knows whether `user` read it (`knowsReader`, after the store's lookup).
    mutating func markRead(_ user: Id) -> UInt64? {
        guard readers[user] == nil else { return nil }
        readCount += 1
        readers[user] = UInt64(readCount)
        return UInt64(readCount)
    }

    /// The ordinal of `user`'s receipt, if known.
    public func ordinal(of user: Id) -> UInt64? { readers[user] }

    /// Adds one stored receipt (entries come in reader order, not receipt order); `false` when its
    /// ordinal is out of range or the reader is already known. The tally is complete once every reader is.
    public mutating func restoreRead(_ user: Id, ordinal: UInt64) -> Bool {
        guard ordinal >= 1, ordinal <= UInt64(readCount), readers[user] == nil else { return false }
        readers[user] = ordinal
        if readers.count == readCount { complete = true }
        return true
    }

    /// Readers in receipt order (complete tallies: all of them).
    public var readersInOrder: [Id] { readers.sorted { $0.value < $1.value }.map(\.key) }

    /// Equal counts and receivers, and equal readers when both know all of theirs.
    public static func == (a: ReceiptState, b: ReceiptState) -> Bool {
        a.receiverCount == b.receiverCount && a.directedReceivers == b.directedReceivers && a.readCount == b.readCount
            && (!a.complete || !b.complete || a.readers == b.readers)
    }
}
