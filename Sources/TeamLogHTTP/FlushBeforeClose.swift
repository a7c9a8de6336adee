import NIOCore

/// Holds a connection's close until the response bytes already written reach the socket.
///
/// On a graceful stop Hummingbird closes each connection right after writing the end of its last response
/// (`HTTPConnectionStateHandler`: `writeAndFlush(end)` then `close`), and a NIO close fails the writes the
/// socket has not taken yet: a response larger than the socket buffers at that moment — a POST of 60,000
/// ops answered with 4.8 MB of records, a 60,000-member team — reached the client cut short after its
/// `200` (the trial saw 3.9 MB of 4.8), while the server exited 0 as if it had finished its requests in
/// flight. Placed between that handler and the socket, this one defers such a close until the writes before
/// it have completed, or for at most `limit` (the stop's `--shutdown-timeout-s`; a client that stops
/// reading does not hold the stop for longer), and lets a second close through at once.
final class FlushBeforeClose: ChannelOutboundHandler, RemovableChannelHandler {
    // Whatever parts pass (HTTP response parts here): counted and passed on, never looked into.
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    private let limit: TimeAmount?
    /// Writes passed on whose promise has not completed yet.
    private var pending = 0
    /// A close waiting for them.
    private var deferred: (mode: CloseMode, promise: EventLoopPromise<Void>?)?
    private var deadline: Scheduled<Void>?

    init(limit: TimeAmount?) { self.limit = limit }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        pending += 1
        let written = promise ?? context.eventLoop.makePromise()
        written.futureResult.whenComplete { [self] _ in
            pending -= 1
            if pending == 0 { closeNow(context) }
        }
        context.write(data, promise: written)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode != .input, pending > 0, deferred == nil else {
            if let waiting = deferred, mode != .input {
                // A second close (the stop's cancellation, the idle timeout): now, for both.
                deferred = nil
                deadline?.cancel()
                context.close(mode: waiting.mode, promise: waiting.promise)
            }
            context.close(mode: mode, promise: promise)
            return
        }
        deferred = (mode, promise)
        if let limit {
            deadline = context.eventLoop.scheduleTask(in: limit) { [self] in closeNow(context) }
        }
    }

    private func closeNow(_ context: ChannelHandlerContext) {
        guard let waiting = deferred else { return }
        deferred = nil
        deadline?.cancel()
        deadline = nil
        context.close(mode: waiting.mode, promise: waiting.promise)
    }
}
