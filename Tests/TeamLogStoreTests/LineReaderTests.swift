import TeamLog
import TeamLogRuntime
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The line limit counts content only: the CR of a CRLF line end is not part of the line (issue 10 §6).
@Suite struct LineReaderTests {
    /// Reads every line of `bytes` from a pipe, written in `pieces` with a read attempt between them.
    func lines(_ pieces: [[UInt8]], limit: Int) throws -> [LineReader.Line] {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        var reader = LineReader(fd: fds[0], limit: limit)
        var out: [LineReader.Line] = []
        for piece in pieces {
            var written = 0
            while written < piece.count {
                let n = piece[written...].withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
                #expect(n > 0)
                written += n
                while case .line(let line) = try reader.next(timeoutMs: 0) { out.append(line) }
            }
        }
        close(fds[1])
        while let line = try reader.next() { out.append(line) }
        close(fds[0])
        return out
    }

    func describe(_ line: LineReader.Line) -> String {
        switch line {
        case .text(let n, let bytes): "\(n): text \(bytes.count)"
        case .tooLong(let n, let length): "\(n): tooLong \(length)"
        }
    }

    @Test func aLineOfExactlyTheLimitEndedByCRLFIsContent() throws {
        let mebibyte = OpParser.maxLineBytes
        let x = UInt8(ascii: "x")
        let input =
            [UInt8](repeating: x, count: mebibyte) + [0x0D, 0x0A]
            + [UInt8](repeating: x, count: mebibyte + 1) + [0x0D, 0x0A]
            + [UInt8](repeating: x, count: mebibyte) + [0x0A]
            + [UInt8](repeating: x, count: mebibyte) + [0x0D]  // a last line without its newline
        let pieces = stride(from: 0, to: input.count, by: 1 << 16).map {
            Array(input[$0..<min($0 + (1 << 16), input.count)])
        }
        let got = try lines(pieces, limit: mebibyte)
        #expect(got.map(describe) == ["1: text 1048576", "2: tooLong 1048577", "3: text 1048576", "4: text 1048576"])
    }

    /// The CR is the last byte of an over-long line's dropped part when the newline comes later.
    @Test(arguments: [
        ([Array("12345678\r".utf8), [0x0A]], "1: text 8"),
        ([Array("123456789\r".utf8), [0x0A]], "1: tooLong 9"),
        ([Array("1234567890\r".utf8), [0x0A]], "1: tooLong 10"),
        ([Array("1234567890".utf8), Array("\r\n".utf8)], "1: tooLong 10"),
        ([Array("1234567\r\r".utf8), [0x0A]], "1: text 8"),  // one CR is content, the last ends the line
    ] as [([[UInt8]], String)])
    func crlfSplitAcrossReads(_ pieces: [[UInt8]], _ expected: String) throws {
        #expect(try lines(pieces, limit: 8).map(describe) == [expected])
    }
}
