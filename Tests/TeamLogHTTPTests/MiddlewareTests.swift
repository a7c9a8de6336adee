@testable import TeamLogHTTP
import TeamLogThreads
import Testing

@Suite struct MiddlewareTests {
    final class Count: @unchecked Sendable {
        let monitor = Monitor()
        var value = 0
        func add() { monitor.locked { value += 1 } }
        var current: Int { monitor.locked { value } }
    }

    /// A streamed response's duration is recorded exactly once: when its body ends (however often that is
    /// reported), or — a body never written because its client went away before the head was sent — when
    /// the response is let go.
    @Test func aStreamedRequestIsRecordedOnceWrittenOrNot() {
        let written = Count()
        do {
            let once = RecordOnce { written.add() }
            once.fire()
            once.fire()
            #expect(written.current == 1)
        }
        #expect(written.current == 1, "released after it fired: not recorded again")
        let dropped = Count()
        do {
            let once = RecordOnce { dropped.add() }
            withExtendedLifetime(once) { #expect(dropped.current == 0) }
        }
        #expect(dropped.current == 1, "never written: recorded when released")
    }
}
