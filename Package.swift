// swift-tools-version:6.0
// Tender: an Apple Pay merchant backend. Targets are split by dependency and trust:
// one systemLibrary per C library, one thin Swift module that alone imports it,
// a pure domain core, and one executable that wires everything.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

// The wrappers also make every other import internal unless it says `public import`.
let wrapper: [SwiftSetting] = strict + [
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Tender",
    products: [
        .executable(name: "tender", targets: ["tender"]),
    ],
    targets: [
        // C libraries from Debian, each through pkg-config.
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ", pkgConfig: "libpq",
                       providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),

        // Thin wrappers: the only modules that import a C library, as `internal import` (scripts/tidy.sh
        // checks both), so the compiler refuses any C type in a wrapper's public or inlinable API.
        .target(name: "Postgres", dependencies: ["CLibPQ", "Time"], swiftSettings: wrapper),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "Time"], swiftSettings: wrapper),
        .target(name: "Crypto", dependencies: ["COpenSSL"], swiftSettings: wrapper),
        .target(name: "HTTPClient", dependencies: ["CCurl"], swiftSettings: wrapper),

        // Pure domain core: no I/O.
        // Time: the clock (the only reader of the wall clock), RFC 3339 text and the civil calendar.
        .target(name: "Time", swiftSettings: strict),
        .target(name: "Observability", dependencies: ["Time"], swiftSettings: strict),
        .target(name: "Money", swiftSettings: strict),
        .target(name: "PaymentRequest", dependencies: ["Money", "Time"], swiftSettings: strict),
        .target(name: "ApplePayToken", dependencies: ["Crypto", "Money"], swiftSettings: strict),
        .target(name: "FinanceStore", dependencies: ["Money", "Time"], swiftSettings: strict),
        .target(name: "Reconciliation", dependencies: ["Money", "Time"], swiftSettings: strict),
        .target(name: "Payments", dependencies: ["Money", "Time"], swiftSettings: strict),

        // Shell: routes, auth, stores, configuration, CLI commands.
        .target(name: "TenderServer",
                dependencies: ["Postgres", "HTTPServer", "HTTPClient", "Crypto", "Money", "PaymentRequest",
                               "ApplePayToken", "Payments", "FinanceStore", "Reconciliation", "Observability", "Time"],
                swiftSettings: strict),
        .executableTarget(name: "tender", dependencies: ["TenderServer"], swiftSettings: strict),

        .testTarget(name: "TimeTests", dependencies: ["Time"]),
        .testTarget(name: "MoneyTests", dependencies: ["Money"]),
        .testTarget(name: "PaymentRequestTests", dependencies: ["PaymentRequest", "Money"]),
        .testTarget(name: "CryptoTests", dependencies: ["Crypto"]),
        .testTarget(name: "ApplePayTokenTests", dependencies: ["ApplePayToken", "Crypto", "Money"], exclude: ["crashers"],
                    resources: [.copy("Vectors")]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres"]),
        .testTarget(name: "HTTPClientTests", dependencies: ["HTTPClient"]),
        .testTarget(name: "FinanceStoreTests", dependencies: ["FinanceStore", "Money"]),
        .testTarget(name: "ReconciliationTests", dependencies: ["Reconciliation", "Money"], resources: [.copy("Vectors")]),
        .testTarget(name: "PaymentsTests", dependencies: ["Payments", "Money"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer"]),
        .testTarget(name: "TenderServerTests",
                    dependencies: ["TenderServer", "Postgres", "HTTPServer", "HTTPClient", "Crypto", "Money",
                                   "PaymentRequest", "ApplePayToken", "Payments", "FinanceStore", "Reconciliation", "Time"],
                    exclude: ["Wallet/apns_server.py"]),
    ],
    swiftLanguageModes: [.v6]
)
