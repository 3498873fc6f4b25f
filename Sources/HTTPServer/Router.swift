/// A request handler: synchronous, may block (it runs on a dedicated worker thread).
/// A thrown `HTTPProblem` becomes its response; any other error becomes a generic 500 `internal_error`.
public typealias HTTPHandler = @Sendable (HTTPRequest) throws -> HTTPResponse

/// The outcome of routing a method and path.
public enum RouteMatch: Sendable {
    /// A route matched: its handler, pattern, captured parameters and whether it runs on the I/O thread.
    case found(HTTPHandler, pattern: String, parameters: [String: String], inline: Bool)
    /// The path exists for other methods only.
    case methodNotAllowed(allowed: [String])
    /// No route has this path.
    case notFound
}

/// A table of method + path pattern to handler; `{name}` segments capture one path segment.
public struct Router: Sendable {
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    private struct Route: Sendable {
        var method: String
        var pattern: String
        var segments: [Segment]
        var inline: Bool
        var handler: HTTPHandler
    }

    private var routes: [Route] = []

    /// Creates an empty router.
    public init() {}

    /// Adds a route such as `add("POST", "/v1/payments/{id}/refunds") { … }`; `inline: true` runs the
    /// handler on the I/O thread, only for trivial non-blocking handlers such as /healthz.
    public mutating func add(_ method: String, _ pattern: String, inline: Bool = false, _ handler: @escaping HTTPHandler) {
        let segments = Self.split(pattern).map { part -> Segment in
            if part.hasPrefix("{"), part.hasSuffix("}"), part.count > 2 {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            return .literal(part)
        }
        precondition(!routes.contains { $0.method == method && $0.segments == segments },
                     "duplicate route \(method) \(pattern)")
        routes.append(Route(method: method, pattern: pattern, segments: segments, inline: inline, handler: handler))
    }

    /// Finds the route for a request; literal segments win over parameters at the first position they differ.
    public func match(method: String, path: String) -> RouteMatch {
        let parts = Self.split(path)
        guard parts.count < Self.segmentsRanked else { return Self.matchLong(routes, method: method, parts: parts) }
        var best: (index: Int, rank: UInt64)?
        var allowed: [String] = []
        for index in routes.indices where routes[index].segments.count == parts.count {
            guard let rank = Self.rank(routes[index].segments, against: parts) else { continue }
            guard routes[index].method == method else {
                if !allowed.contains(routes[index].method) { allowed.append(routes[index].method) }
                continue
            }
            // The first route of the highest rank wins, as before: later ones must rank strictly higher.
            if let current = best, rank <= current.rank { continue }
            best = (index, rank)
        }
        if let best {
            let route = routes[best.index]
            return .found(route.handler, pattern: route.pattern, parameters: Self.parameters(route.segments, parts),
                          inline: route.inline)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed.sorted())
    }

    /// Paths with this many segments or more are matched by `matchLong` (a rank is one bit per segment).
    static let segmentsRanked = 64

    /// A route's rank for `parts`, or nil when it does not match: bit 63 − i is set when segment i matched
    /// literally, so comparing ranks as integers finds the first position where they differ and prefers the literal.
    private static func rank(_ segments: [Segment], against parts: [String]) -> UInt64? {
        var rank: UInt64 = 0
        for index in segments.indices {
            switch segments[index] {
            case .literal(let text):
                guard text == parts[index] else { return nil }
                rank |= 1 << UInt64(63 - index)
            case .parameter:
                guard !parts[index].isEmpty else { return nil }
            }
        }
        return rank
    }

    private static func parameters(_ segments: [Segment], _ parts: [String]) -> [String: String] {
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, parts) {
            if case .parameter(let name) = segment { parameters[name] = part }
        }
        return parameters
    }

    /// The general matcher, for paths too long to rank in 64 bits.
    private static func matchLong(_ routes: [Route], method: String, parts: [String]) -> RouteMatch {
        var best: (route: Route, parameters: [String: String], rank: [Bool])?
        var allowed: [String] = []
        for route in routes {
            guard let (parameters, rank) = Self.bind(route.segments, to: parts) else { continue }
            guard route.method == method else {
                if !allowed.contains(route.method) { allowed.append(route.method) }
                continue
            }
            if let current = best, !Self.ranksHigher(rank, than: current.rank) { continue }
            best = (route, parameters, rank)
        }
        if let best {
            return .found(best.route.handler, pattern: best.route.pattern, parameters: best.parameters,
                          inline: best.route.inline)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed.sorted())
    }

    /// The routes of `method` added with `inline: true` whose pattern has no parameter, by path: the
    /// edge answers these itself (`Edge.Settings.inlineRoutes`).
    func inlineLiteralRoutes(method: String) -> [String: HTTPHandler] {
        var found: [String: HTTPHandler] = [:]
        for route in routes where route.method == method && route.inline
            && route.segments.allSatisfy({ if case .literal = $0 { return true } else { return false } }) {
            found[route.pattern] = route.handler
        }
        return found
    }

    private static func split(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
    }

    /// Captured parameters and, per segment, whether it matched literally.
    private static func bind(_ segments: [Segment], to parts: [String]) -> ([String: String], [Bool])? {
        guard segments.count == parts.count else { return nil }
        var parameters: [String: String] = [:]
        var rank: [Bool] = []
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let text):
                guard text == part else { return nil }
                rank.append(true)
            case .parameter(let name):
                guard !part.isEmpty else { return nil }
                parameters[name] = part
                rank.append(false)
            }
        }
        return (parameters, rank)
    }

    private static func ranksHigher(_ a: [Bool], than b: [Bool]) -> Bool {
        for (x, y) in zip(a, b) where x != y { return x }
        return false
    }
}
