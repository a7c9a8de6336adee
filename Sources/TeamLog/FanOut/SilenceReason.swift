/// Why a receiver is not alerted (SPEC §2), in the order the rule tries them: the first match wins.
public enum SilenceReason: String, Sendable, CaseIterable, Hashable {
    case disableNotification, tip, statusMessage, notifyNone, managerOnly
}
