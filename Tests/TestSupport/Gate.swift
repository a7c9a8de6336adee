import TeamLogThreads

/// A gate that threads wait at until it opens, counting who arrived: for holding calls blocked on a thread
/// pool (`BlockingPool`) while a test looks at it.
public final class Gate: @unchecked Sendable {
    private let monitor = Monitor()
    private var isOpen: Bool
    private var arrivals = 0

    /// `open`: a gate that is open from the start only counts who passes.
    public init(open: Bool = false) { isOpen = open }

    /// Counts the caller in and waits until the gate is open.
    public func pass() {
        monitor.locked {
            arrivals += 1
            monitor.broadcast()
            monitor.wait { isOpen }
        }
    }

    /// Lets every waiter, and every later caller, through.
    public func open() {
        monitor.locked {
            isOpen = true
            monitor.broadcast()
        }
    }

    /// How many have arrived so far.
    public var arrived: Int { monitor.locked { arrivals } }

    /// Waits until `n` have arrived or `timeoutMs` passed; whether they have.
    public func waitForArrivals(_ n: Int, timeoutMs: Int) -> Bool {
        monitor.locked { monitor.wait(until: { arrivals >= n }, timeoutMs: timeoutMs) }
    }
}
