// A stand-in for Safari's ApplePaySession, injected before any page script runs
// (Page.addScriptToEvaluateOnNewDocument). It fires the sheet events in Safari's order, records every
// complete… argument with its time, and records every answer Tender gave to the page, so the test can
// compare what the page passed to Apple with what Tender returned. `window.__stubConfig` is set by the
// test before this file: {scenario: "happy" | "payment_timeout" | "payment_answer_lost" | "contact_network_error" |
// "validation_failure"}.
(() => {
  const config = window.__stubConfig || { scenario: "happy" };
  const log = { events: [], completions: [], responses: [], errors: [] };
  window.__stubLog = log;
  const now = () => performance.now();

  // Tender's answers as the page received them, byte for byte.
  const realFetch = window.fetch.bind(window);
  let clientSecret = null;
  let sessionId = null;
  window.fetch = async (input, init = {}) => {
    const url = typeof input === "string" ? input : input.url;
    const method = (init.method || "GET").toUpperCase();
    const auth = init.headers && (init.headers.Authorization || init.headers.authorization);
    const match = /\/v1\/checkout-sessions\/([^/?]+)(\/[a-z-]+)?/.exec(url);
    if (match && auth) { clientSecret = auth.replace(/^Bearer /, ""); sessionId = decodeURIComponent(match[1]); }
    const suffix = match ? (match[2] || "") : null;
    if (config.scenario === "payment_timeout" && suffix === "/payments" && method === "POST") {
      // A Tender that never answers: only the page's own deadline ends the call.
      return new Promise((_, reject) => {
        const signal = init.signal;
        if (signal) signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
      });
    }
    if (config.scenario === "contact_network_error" && suffix === "/shipping-contact") {
      throw new TypeError("Failed to fetch");
    }
    if (config.scenario === "payment_answer_lost" && suffix === "/payments" && method === "POST") {
      // Tender charges, the connection drops before the page reads the answer.
      const charged = await realFetch(input, init);
      log.responses.push({ suffix, status: charged.status, text: await charged.text(), at: now(), lost: true });
      throw new TypeError("Failed to fetch");
    }
    const response = await realFetch(input, init);
    if (suffix !== null && method === "POST") {
      const text = await response.clone().text();
      log.responses.push({ suffix, status: response.status, text, at: now() });
    }
    return response;
  };

  class ApplePayError {
    constructor(code, contactField, message) {
      this.code = code;
      if (contactField !== undefined) this.contactField = contactField;
      if (message !== undefined) this.message = message;
    }
  }

  class ApplePaySession {
    static STATUS_SUCCESS = 0;
    static STATUS_FAILURE = 1;
    static canMakePayments() { return true; }
    static supportsVersion(v) { return v >= 1 && v <= 14; }

    constructor(version, request) {
      log.constructed = { version, request: JSON.parse(JSON.stringify(request)) };
      this.version = version;
      this.request = request;
      this.pending = null;
      this.done = false;
    }

    fire(name, event, completion) {
      if (this.done) return;
      log.events.push({ name, at: now() });
      this.pending = { completion, firedAt: now() };
      const handler = this[name];
      if (typeof handler !== "function") { log.errors.push(`no handler for ${name}`); return; }
      try { handler.call(this, event); } catch (e) { log.errors.push(`${name} threw ${e}`); }
    }

    record(method, argument) {
      const firedAt = this.pending ? this.pending.firedAt : null;
      const expected = this.pending ? this.pending.completion : null;
      // JSON round trip: what Safari would read from the dictionary (ApplePayError's own members).
      log.completions.push({ method, expected, argument: JSON.parse(JSON.stringify(argument ?? null)),
        elapsedMilliseconds: firedAt === null ? null : now() - firedAt });
      this.pending = null;
    }

    begin() {
      log.events.push({ name: "begin", at: now() });
      const validationURL = config.scenario === "validation_failure"
        ? "https://apple-pay-gateway-cert.apple.com/paymentservices/paymentSession"
        : "https://apple-pay-gateway.sandbox.tender.invalid/paymentservices/paymentSession";
      setTimeout(() => this.fire("onvalidatemerchant", { validationURL }, "completeMerchantValidation"), 0);
    }

    abort() {
      this.record("abort", null);
      this.done = true;
    }

    completeMerchantValidation(merchantSession) {
      this.record("completeMerchantValidation", merchantSession);
      // Safari, once the sheet is up: the card, then the redacted shipping contact.
      setTimeout(() => this.fire("onpaymentmethodselected",
        { paymentMethod: { displayName: "Visa 1111", network: "Visa", type: "debit" } },
        "completePaymentMethodSelection"), 0);
    }

    completePaymentMethodSelection(update) {
      this.record("completePaymentMethodSelection", update);
      setTimeout(() => this.fire("onshippingcontactselected",
        { shippingContact: { countryCode: "US", postalCode: "95014", locality: "Cupertino", administrativeArea: "CA" } },
        "completeShippingContactSelection"), 0);
    }

    completeShippingContactSelection(update) {
      this.record("completeShippingContactSelection", update);
      if (config.scenario === "contact_network_error") {
        setTimeout(() => this.cancel(), 0);
        return;
      }
      setTimeout(() => this.fire("onshippingmethodselected",
        { shippingMethod: { identifier: "express", label: "Express", detail: "1–2 days", amount: "14.99" } },
        "completeShippingMethodSelection"), 0);
    }

    completeShippingMethodSelection(update) {
      this.record("completeShippingMethodSelection", update);
      setTimeout(() => this.fire("oncouponcodechanged", { couponCode: "SAVE10" }, "completeCouponCodeChange"), 0);
    }

    async completeCouponCodeChange(update) {
      this.record("completeCouponCodeChange", update);
      // Apple signs a token for the total on the sheet: here the sandbox mints it for the session.
      const minted = await realFetch("/demo/api/sandbox-token", {
        method: "POST",
        headers: { Authorization: `Bearer ${clientSecret}`, "Content-Type": "application/json" },
        body: JSON.stringify({ sessionId }),
      });
      const token = await minted.json();
      const contact = { givenName: "Stub", familyName: "Shopper", addressLines: ["1 Infinite Loop"], locality: "Cupertino",
        administrativeArea: "CA", postalCode: "95014", countryCode: "US", emailAddress: "stub@example.com" };
      this.fire("onpaymentauthorized", { payment: { token, shippingContact: contact, billingContact: contact } },
        "completePayment");
    }

    completePayment(result) {
      this.record("completePayment", result);
      const status = result && typeof result === "object" ? result.status : result;
      if (status === ApplePaySession.STATUS_SUCCESS) {
        this.done = true;
      } else {
        // The shopper gives up after the failure.
        setTimeout(() => this.cancel(), 0);
      }
    }

    cancel() {
      if (this.done) return;
      this.done = true;
      log.events.push({ name: "oncancel", at: now() });
      if (typeof this.oncancel === "function") this.oncancel({});
    }
  }

  window.ApplePaySession = ApplePaySession;
  window.ApplePayError = ApplePayError;
})();
