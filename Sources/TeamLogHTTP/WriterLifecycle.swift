public import ServiceLifecycle
public import TeamLogRuntime
import TeamLogThreads

/// The writer as a swift-service-lifecycle `Service`: it runs until the group shuts down gracefully,
/// then stops the writer — what was queued is committed, a last checkpoint is written, the store is
/// closed — on a thread of its own (stopping joins the writer's thread). List it before the server in
/// the `ServiceGroup`, which stops services in reverse order: the server has finished its in-flight
/// requests by then.
public struct WriterLifecycle: Service {
    public let writer: WriterService

    public init(writer: WriterService) { self.writer = writer }

    public func run() async throws {
        try? await gracefulShutdown()  // returns on graceful shutdown; throws on cancellation
        let writer = self.writer
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if startThread({
                writer.stop()
                continuation.resume()
            }) == nil {
                writer.stop()
                continuation.resume()
            }
        }
    }
}
