import ArgumentParser
import TeamLogStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `teamlog debug-hold-reader --store PATH`: opens a read transaction and holds it until killed.
///
/// Hidden; tests use it to leave a reader slot behind a SIGKILLed process, which the next open of the
/// environment must clear (`mdb_reader_check`).
struct DebugHoldReader: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug-hold-reader",
        abstract: "Hold a read transaction on the store until killed (for tests).",
        shouldDisplay: false)

    @OptionGroup var storeOptions: StoreOptions

    func run() throws {
        let store = try openForQuery(storeOptions.path)
        try store.env.read { _ in
            // "ready" only once the reader slot is taken, so the parent knows when to kill.
            try printOut("ready")
            while true { sleep(1) }
        }
    }
}
