/// What applying an event produces besides the state change: the records `ingest` prints after `event`.
public enum Output: Sendable, Equatable {
    case tip(Tip)
    case notice(Notice)
    case delivery(Delivery)
    case signal(Signal)
    case login(Login)
}
