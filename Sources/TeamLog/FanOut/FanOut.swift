/// The fan-out core: for one message to a team, who receives it and who is alerted, as bitsets.
///
/// SPEC §2. Receivers are the present members (or the directed ones), never the sender; a status
/// message reaches only members with an online device. Alerts: a message-level reason
/// (`disableNotification`, `tip`, `statusMessage`) silences every receiver; otherwise notify state
/// `none` silences, and `managerOnly` silences unless the sender is owner/manager or the receiver is
/// mentioned. Alert mode never changes receiving or counting: those bits are computed first, from
/// membership and presence alone.
///
/// All work is word-wise over 64 members at a time into reusable buffers; nothing allocates per message
/// once the buffers have grown to the team's size.
public struct FanOut: Sendable {
    /// What one message asks for.
    public struct Message: Sendable {
        /// Slot of the sender, when the sender is a member (tips: the actor is a receiver too).
        public var senderSlot: Int?
        public var senderIsAdmin: Bool
        /// A reason that silences every receiver, if any (first match of the message-level reasons).
        public var silenceAll: SilenceReason?
        /// Status message: only members with an online device receive it.
        public var onlineOnly: Bool
        /// Directed: only these slots (bitset) may receive it.
        public var directed: [UInt64]?
        /// Mentioned slots (bitset): alerted despite `managerOnly`.
        public var mentions: [UInt64]?

        public init(
            senderSlot: Int?, senderIsAdmin: Bool, silenceAll: SilenceReason? = nil, onlineOnly: Bool = false,
            directed: [UInt64]? = nil, mentions: [UInt64]? = nil
        ) {
            self.senderSlot = senderSlot
            self.senderIsAdmin = senderIsAdmin
            self.silenceAll = silenceAll
            self.onlineOnly = onlineOnly
            self.directed = directed
            self.mentions = mentions
        }
    }

    /// Receivers.
    public private(set) var receivers: [UInt64] = []
    /// Receivers alerted.
    public private(set) var alerted: [UInt64] = []
    /// Receivers silenced by notify state `none`.
    public private(set) var silencedNone: [UInt64] = []
    /// Receivers silenced by `managerOnly`.
    public private(set) var silencedManagerOnly: [UInt64] = []
    /// The reason for every silenced receiver when the message itself silences all.
    public private(set) var silenceAll: SilenceReason?
    /// Whether the last run decided alerts too (`alerted`, the silenced sets and `silenceAll` are its),
    /// or only `receivers`.
    public private(set) var hasAlerts = false

    public init() {}

    /// Decides one message against a team's member bits: receivers and, when `alerts` (a delivery will
    /// list them), who is alerted and why the others are silenced. Receiving never depends on alerting,
    /// so a run without alerts gives the same `receivers`.
    public mutating func run(_ bits: MemberBits, _ m: Message, alerts: Bool = true) {
        let n = bits.wordCount
        if receivers.count != n {
            receivers = [UInt64](repeating: 0, count: n)
            alerted = receivers
            silencedNone = receivers
            silencedManagerOnly = receivers
        }
        silenceAll = m.silenceAll
        hasAlerts = alerts
        receivers.withUnsafeMutableBufferPointer { rcv in
            alerted.withUnsafeMutableBufferPointer { alr in
                silencedNone.withUnsafeMutableBufferPointer { sn in
                    silencedManagerOnly.withUnsafeMutableBufferPointer { smo in
                        bits.present.withUnsafeBufferPointer { present in
                            bits.online.withUnsafeBufferPointer { online in
                                bits.notifyNone.withUnsafeBufferPointer { none in
                                    bits.notifyManagerOnly.withUnsafeBufferPointer { mo in
                                        Self.kernel(
                                            n: n, present: present, online: online, none: none, managerOnly: mo,
                                            message: m, alerts: alerts, receivers: rcv, alerted: alr,
                                            silencedNone: sn, silencedManagerOnly: smo)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    @inline(__always)
    private static func kernel(
        n: Int, present: UnsafeBufferPointer<UInt64>, online: UnsafeBufferPointer<UInt64>,
        none: UnsafeBufferPointer<UInt64>, managerOnly: UnsafeBufferPointer<UInt64>, message m: Message,
        alerts: Bool, receivers: UnsafeMutableBufferPointer<UInt64>, alerted: UnsafeMutableBufferPointer<UInt64>,
        silencedNone: UnsafeMutableBufferPointer<UInt64>, silencedManagerOnly: UnsafeMutableBufferPointer<UInt64>
    ) {
        let onlineMask: UInt64 = m.onlineOnly ? 0 : ~0
        let alertMask: UInt64 = m.silenceAll == nil ? ~0 : 0
        let managerOnlyMask: UInt64 = m.senderIsAdmin ? 0 : ~0
        // Receiving and counting: presence, direction, online (status), never the sender.
        if let directed = m.directed {
            for w in 0..<n {
                let d = w < directed.count ? directed[w] : 0
                receivers[w] = present[w] & d & (online[w] | onlineMask)
            }
        } else {
            for w in 0..<n { receivers[w] = present[w] & (online[w] | onlineMask) }
        }
        if let s = m.senderSlot, s >> 6 < n { receivers[s >> 6] &= ~(1 << UInt64(s & 63)) }
        guard alerts else { return }
        // Alerting: never feeds back into receivers.
        if let mentions = m.mentions {
            for w in 0..<n {
                let r = receivers[w] & alertMask
                let sn = r & none[w]
                let ment = w < mentions.count ? mentions[w] : 0
                let smo = r & ~sn & managerOnly[w] & ~ment & managerOnlyMask
                silencedNone[w] = sn
                silencedManagerOnly[w] = smo
                alerted[w] = r & ~sn & ~smo
            }
        } else {
            for w in 0..<n {
                let r = receivers[w] & alertMask
                let sn = r & none[w]
                let smo = r & ~sn & managerOnly[w] & managerOnlyMask
                silencedNone[w] = sn
                silencedManagerOnly[w] = smo
                alerted[w] = r & ~sn & ~smo
            }
        }
    }

    /// The reason a receiving slot is silenced, or `nil` when it is alerted (or not a receiver).
    public func reason(_ slot: Int) -> SilenceReason? {
        guard MemberBits.test(receivers, slot) else { return nil }
        if let silenceAll { return silenceAll }
        if MemberBits.test(silencedNone, slot) { return .notifyNone }
        if MemberBits.test(silencedManagerOnly, slot) { return .managerOnly }
        return nil
    }
}
