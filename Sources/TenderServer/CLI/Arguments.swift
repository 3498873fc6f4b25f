import Foundation
import HTTPServer

/// Exit codes of the `tender` executable.
public enum ExitCode: Int32, Sendable {
    case success = 0
    /// The operation ran and failed (bad token, duplicate merchant, …); stdout/stderr name the code.
    case failure = 1
    /// Unknown command or flag, missing value (sysexits EX_USAGE).
    case usage = 64
    /// The database or another dependency was unreachable (EX_UNAVAILABLE).
    case unavailable = 69
    /// Invalid configuration in the environment (EX_CONFIG).
    case configuration = 78
}

/// A usage mistake on the command line.
public struct UsageError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// Hand-written flag parsing: `--name value`, `--name=value` and boolean `--flag`.
public struct Arguments: Sendable {
    /// Longest accepted value, so a runaway shell expansion cannot balloon memory.
    static let valueBytesMax = 65_536
    private var options: [String: String] = [:]
    private var flags: Set<String> = []
    public private(set) var positionals: [String] = []
    public let wantsHelp: Bool

    /// Parses `argv` against the known option names (taking a value) and flag names (boolean).
    public init(_ argv: [String], options known: Set<String>, flags knownFlags: Set<String> = []) throws(UsageError) {
        var help = false
        var i = 0
        while i < argv.count {
            let arg = argv[i]
            if arg == "--help" || arg == "-h" {
                help = true
                i += 1
                continue
            }
            if arg.hasPrefix("--") {
                var name = String(arg.dropFirst(2))
                var value: String?
                if let eq = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if knownFlags.contains(name) {
                    guard value == nil else { throw UsageError(message: "--\(name) takes no value") }
                    flags.insert(name)
                } else if known.contains(name) {
                    if value == nil {
                        guard i + 1 < argv.count, !argv[i + 1].hasPrefix("--") else {
                            throw UsageError(message: "--\(name) needs a value")
                        }
                        i += 1
                        value = argv[i]
                    }
                    guard let v = value, v.utf8.count <= Self.valueBytesMax else {
                        throw UsageError(message: "--\(name) value is too long")
                    }
                    guard options[name] == nil else { throw UsageError(message: "--\(name) given twice") }
                    options[name] = v
                } else {
                    throw UsageError(message: "unknown option --\(name)")
                }
            } else {
                positionals.append(arg)
            }
            i += 1
        }
        wantsHelp = help
    }

    /// The value of `--name`, or nil.
    public func value(_ name: String) -> String? { options[name] }

    /// The value of `--name`, or a usage error naming it.
    public func required(_ name: String) throws(UsageError) -> String {
        guard let v = options[name], !v.isEmpty else { throw UsageError(message: "missing --\(name)") }
        return v
    }

    /// Whether the boolean `--name` was given.
    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// Comma-separated list value.
    public func list(_ name: String) throws(UsageError) -> [String] {
        try required(name).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Refuses positional arguments beyond `count`.
    public func expectPositionals(_ count: Int) throws(UsageError) {
        guard positionals.count <= count else {
            throw UsageError(message: "unexpected argument \(positionals[count])")
        }
    }
}

/// Writes to stdout/stderr without going through the logger (command output is data, not logs).
public enum Console {
    public static func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    public static func err(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Pretty, key-sorted JSON for command output.
    public static func json<T: Encodable>(_ value: T) {
        if let data = try? JSONCoding.prettyEncoder.encode(value), let text = String(data: data, encoding: .utf8) {
            out(text)
        }
    }
}
