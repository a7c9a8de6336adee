/// The fields of `message.send` (SPEC §1.2, NCMessage's flags).
public struct MessageSend: Sendable, Equatable {
    public var to: Conversation
    public var messageId: Id
    /// `{"type": "text"|"image"|…, …}` as given (a JSON object).
    public var content: JSONValue
    public var needReceipt: Bool = false
    /// Only these members receive it (`nil`: every member).
    public var directedUserIds: [Id]? = nil
    public var disableNotification: Bool = false
    public var disableUpdateLastMessage: Bool = false
    public var isCounted: Bool = true
    /// The `isCounted` the input gave (`nil`: none), for `decide`'s checks of explicit combinations. Not
    /// stored in the log nor compared: the resolved `isCounted` is what an accepted message means.
    public var explicitIsCounted: Bool? = nil
    public var isPersisted: Bool = true
    public var isStatusMessage: Bool = false
    public var metadata: [(key: String, value: String)] = []
    public var mentions: [Id] = []

    public init(to: Conversation, messageId: Id, content: JSONValue) {
        self.to = to
        self.messageId = messageId
        self.content = content
    }

    /// Stored in the messages projection: not for status messages (never stored) or `isPersisted: false`.
    public var isStored: Bool { isPersisted && !isStatusMessage }

    /// Counts toward unread: `isCounted`, and never a status message.
    public var counts: Bool { isCounted && !isStatusMessage }

    public static func == (a: MessageSend, b: MessageSend) -> Bool {
        a.to == b.to && a.messageId == b.messageId && a.content == b.content && a.needReceipt == b.needReceipt
            && a.directedUserIds == b.directedUserIds && a.disableNotification == b.disableNotification
            && a.disableUpdateLastMessage == b.disableUpdateLastMessage && a.isCounted == b.isCounted
            && a.isPersisted == b.isPersisted && a.isStatusMessage == b.isStatusMessage
            && a.metadata.map(\.key) == b.metadata.map(\.key) && a.metadata.map(\.value) == b.metadata.map(\.value)
            && a.mentions == b.mentions
    }
}

/// Message content types a client may send; `notification` and `tip` are the server's own.
public enum ContentType: String, Sendable, CaseIterable {
    case text, image, audio, video, file, location, custom
}
