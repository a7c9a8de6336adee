/// Who receives a message and who is alerted, with the reason for every silenced receiver (SPEC §2, §4).
public struct Delivery: Sendable, Equatable {
    public var seq: UInt64
    /// The conversation as the sender named it.
    public var to: Conversation
    public var messageId: Id
    public var receivers: [Id]
    public var alerted: [Id]
    /// Silenced receivers with their reason, in receiver order.
    public var silenced: [(user: Id, reason: SilenceReason)]

    public static func == (a: Delivery, b: Delivery) -> Bool {
        a.seq == b.seq && a.to == b.to && a.messageId == b.messageId && a.receivers == b.receivers
            && a.alerted == b.alerted && a.silenced.map(\.user) == b.silenced.map(\.user)
            && a.silenced.map(\.reason) == b.silenced.map(\.reason)
    }

    /// The reason `user` is silenced, if they are.
    public func reason(_ user: Id) -> SilenceReason? { silenced.first { $0.user == user }?.reason }
}
