// Tender's browser client: wires Apple Pay JS to a Tender checkout session.
//
//   import { TenderCheckout } from "https://tender.example/tender.js";
//   const result = await TenderCheckout.start({ sessionId, clientSecret, baseURL: "https://tender.example" });
//
// A dependency-free ES module. With window.ApplePaySession it runs Apple's sheet with the session's
// paymentRequest and apiVersion and answers every sheet event through the session endpoints with the
// client secret; without it, and only with `sandbox: true`, it opens an in-page sandbox sheet that drives
// the same endpoints and pays with a sandbox token. Resolves with the payment result
// ({payment, authorizationResult}; payment is null, with sessionStatus "paid", when the answer was lost
// but the session shows the charge); rejects with a TenderError (code "canceled", "payment_failed", …).

/** Apple's sheet gives up 30 s after an event that is not completed. */
export const SHEET_TIMEOUT_MILLISECONDS = 30000;
/** Default budget of one call to Tender: leaves the sheet time to show the failure. */
export const REQUEST_TIMEOUT_MILLISECONDS = 20000;
const STATUS_SUCCESS = 0;
const STATUS_FAILURE = 1;

/** A failure of the checkout, with a stable code and, when Tender answered, its problem. */
export class TenderError extends Error {
  constructor(code, message, details = {}) {
    super(message);
    this.name = "TenderError";
    this.code = code;
    this.problem = details.problem ?? null;
    this.result = details.result ?? null;
  }
}

/** One call to Tender, bounded in time; never throws: {ok, status, json, failure}. */
async function call(context, method, path, body, extraHeaders = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), context.timeoutMilliseconds);
  const headers = { Authorization: `Bearer ${context.clientSecret}`, Accept: "application/json", ...extraHeaders };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    const response = await fetch(context.baseURL + path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      signal: controller.signal, credentials: "omit", cache: "no-store",
    });
    const text = await response.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    return { ok: response.ok, status: response.status, json, failure: response.ok ? null : "http" };
  } catch {
    return { ok: false, status: 0, json: null, failure: controller.signal.aborted ? "timeout" : "network" };
  } finally {
    clearTimeout(timer);
  }
}

function sessionPath(context, suffix) {
  return `/v1/checkout-sessions/${encodeURIComponent(context.sessionId)}${suffix}`;
}

function newIdempotencyKey() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function failureError(reply, fallbackCode) {
  const problem = reply.json && typeof reply.json === "object" ? reply.json : null;
  if (reply.failure === "timeout") return new TenderError("timeout", "Tender did not answer in time.");
  if (reply.failure === "network") return new TenderError("network_error", "Tender could not be reached.");
  return new TenderError(problem?.code ?? fallbackCode, problem?.detail ?? `HTTP ${reply.status}`, { problem });
}

/**
 * Apple Pay JS requires `errors` entries to be ApplePayError objects; Tender sends them as plain
 * dictionaries of the same members. Everything else is passed through untouched.
 */
function forApplePay(update) {
  if (!update || !Array.isArray(update.errors) || typeof globalThis.ApplePayError !== "function") return update;
  return { ...update, errors: update.errors.map((e) => new globalThis.ApplePayError(e.code, e.contactField, e.message)) };
}

/** How long a lost payment answer may take to confirm from the session, inside the sheet's 30 s. */
const CONFIRM_TIMEOUT_MILLISECONDS = 3000;

/**
 * Payments: one idempotency key per authorization attempt (CONTRACT §3). When the answer is lost
 * (timeout, network, a 5xx without authorizationResult) the charge may still have happened, so the
 * session is read once: "paid" means the payment succeeded and the sheet must say so, or the shopper
 * would retry a charged order.
 */
async function pay(context, payment) {
  const body = { token: payment.token };
  if (payment.shippingContact) body.shippingContact = payment.shippingContact;
  if (payment.billingContact) body.billingContact = payment.billingContact;
  const reply = await call(context, "POST", sessionPath(context, "/payments"), body, { "Idempotency-Key": newIdempotencyKey() });
  if (reply.json?.authorizationResult || (reply.status >= 400 && reply.status < 500)) return reply;
  const check = await call({ ...context, timeoutMilliseconds: CONFIRM_TIMEOUT_MILLISECONDS }, "GET", sessionPath(context, ""));
  if (check.ok && check.json?.status === "paid") {
    return { ok: true, status: 200, failure: null,
      json: { payment: null, sessionStatus: "paid", authorizationResult: { status: STATUS_SUCCESS, errors: [] } } };
  }
  return reply;
}

// MARK: - Apple Pay JS

function runApplePay(context, session) {
  return new Promise((resolve, reject) => {
    const Session = globalThis.ApplePaySession;
    const sheet = new Session(session.apiVersion, session.paymentRequest);
    // What the sheet shows now: a failed update completes with it, the total Tender still holds.
    let shown = { newTotal: session.paymentRequest.total, newLineItems: session.paymentRequest.lineItems ?? [] };
    let lastFailure = null;
    let settled = false;
    const remember = (update) => {
      if (update && update.newTotal) shown = { newTotal: update.newTotal, newLineItems: update.newLineItems ?? shown.newLineItems };
    };
    const fallback = (withErrors) => {
      const update = { newTotal: shown.newTotal, newLineItems: shown.newLineItems };
      if (withErrors) update.errors = [{ code: "unknown", message: "Something went wrong; try again." }];
      return update;
    };
    const finish = (ok, value) => {
      if (settled) return;
      settled = true;
      if (ok) resolve(value); else reject(value);
    };

    // Each update event: Tender's dictionary straight to its complete… call, or on a network error or
    // timeout a completion with the current total well inside the sheet's 30 s.
    const update = (suffix, body, complete, errorsAllowed) => {
      call(context, "POST", sessionPath(context, suffix), body).then((reply) => {
        if (reply.ok && reply.json) {
          remember(reply.json);
          complete(forApplePay(reply.json));
        } else {
          lastFailure = failureError(reply, "update_failed");
          complete(forApplePay(fallback(errorsAllowed)));
        }
      });
    };

    sheet.onvalidatemerchant = (event) => {
      call(context, "POST", sessionPath(context, "/merchant-validation"), { validationURL: event.validationURL })
        .then((reply) => {
          if (reply.ok && reply.json) {
            sheet.completeMerchantValidation(reply.json);
          } else {
            // Apple: without a merchant session the only way out is abort().
            sheet.abort();
            finish(false, failureError(reply, "merchant_validation_failed"));
          }
        });
    };
    sheet.onpaymentmethodselected = (event) => update("/payment-method", { paymentMethod: event.paymentMethod },
      (u) => sheet.completePaymentMethodSelection(u), true);
    sheet.onshippingcontactselected = (event) => update("/shipping-contact", { shippingContact: event.shippingContact },
      (u) => sheet.completeShippingContactSelection(u), true);
    sheet.onshippingmethodselected = (event) => update("/shipping-method", { shippingMethod: event.shippingMethod },
      (u) => sheet.completeShippingMethodSelection(u), false);
    sheet.oncouponcodechanged = (event) => update("/coupon-code", { couponCode: event.couponCode ?? "" },
      (u) => sheet.completeCouponCodeChange(u), true);
    sheet.onpaymentauthorized = (event) => {
      pay(context, event.payment).then((reply) => {
        const result = reply.json?.authorizationResult;
        if (result && typeof result.status === "number") {
          sheet.completePayment(forApplePay(result));
          if (reply.ok && result.status === STATUS_SUCCESS) {
            finish(true, reply.json);
          } else {
            lastFailure = reply.ok
              ? new TenderError("payment_declined", "The payment was declined.", { result: reply.json })
              : failureError(reply, "payment_failed");
          }
        } else {
          // No answer Apple can show: fail the authorization so the shopper may retry or cancel.
          sheet.completePayment({ status: Session.STATUS_FAILURE ?? STATUS_FAILURE, errors: [] });
          lastFailure = failureError(reply, "payment_failed");
        }
      });
    };
    sheet.oncancel = () => finish(false, lastFailure ?? new TenderError("canceled", "The shopper closed the sheet."));
    sheet.begin();
  });
}

// MARK: - Sandbox sheet

const COUNTRIES = [["US", "United States"], ["CA", "Canada"], ["GB", "United Kingdom"], ["FR", "France"],
  ["DE", "Germany"], ["JP", "Japan"]];

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === undefined || value === null) continue;
    node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) node.append(child);
  return node;
}

function ensureSheetStyles(context) {
  const href = context.baseURL + "/tender-sheet.css";
  if (document.querySelector(`link[data-tender-sheet]`)) return;
  document.head.append(element("link", { rel: "stylesheet", href, "data-tender-sheet": "" }));
}

/** The amount as the sheet shows it: Tender's decimal string and the currency code, never a float. */
function money(amount, currencyCode) {
  return `${amount} ${currencyCode}`;
}

function runSandboxSheet(context, session) {
  ensureSheetStyles(context);
  const request = session.paymentRequest;
  const currency = session.currencyCode;
  let total = request.total;
  let lineItems = request.lineItems ?? [];
  let methods = request.shippingMethods ?? [];
  let selected = methods[0]?.identifier ?? null;
  let contactErrors = [];
  let busy = 0;
  const opener = document.activeElement;

  const title = element("h2", { id: "tender-sheet-title" }, "Pay with sandbox card");
  const note = element("p", { class: "tender-sheet-note" }, "Sandbox: Visa ending in 1111, no real money moves.");
  const itemsList = element("ul", { class: "tender-sheet-items", "aria-label": "Order summary" });
  const totalAmount = element("span", { "data-testid": "total-amount", "aria-live": "polite" });
  const totalRow = element("p", { class: "tender-sheet-total" }, element("span", {}, "Total "), totalAmount);

  const methodsBox = element("div", { class: "tender-sheet-methods" });
  const methodsFieldset = element("fieldset", {}, element("legend", {}, "Shipping method"), methodsBox);

  const country = element("select", { id: "tender-contact-country", "data-testid": "contact-country",
    "aria-describedby": "tender-contact-country-error", autocomplete: "shipping country" });
  for (const [code, name] of COUNTRIES) country.append(element("option", { value: code }, name));
  const postalCode = element("input", { id: "tender-contact-postal-code", "data-testid": "contact-postal-code",
    type: "text", value: "95014", autocomplete: "shipping postal-code", "aria-describedby": "tender-contact-postal-code-error" });
  const street = element("input", { id: "tender-contact-street", type: "text", value: "1 Infinite Loop",
    autocomplete: "shipping address-line1" });
  const city = element("input", { id: "tender-contact-city", type: "text", value: "Cupertino",
    autocomplete: "shipping address-level2" });
  const countryError = element("p", { id: "tender-contact-country-error", class: "tender-sheet-field-error", role: "alert" });
  const postalError = element("p", { id: "tender-contact-postal-code-error", class: "tender-sheet-field-error", role: "alert" });
  const contactFieldset = element("fieldset", {}, element("legend", {}, "Ship to"),
    element("label", { for: "tender-contact-street" }, "Street"), street,
    element("label", { for: "tender-contact-city" }, "City"), city,
    element("label", { for: "tender-contact-country" }, "Country or region"), country, countryError,
    element("label", { for: "tender-contact-postal-code" }, "Postal code"), postalCode, postalError);

  const coupon = element("input", { id: "tender-coupon", "data-testid": "coupon-input", type: "text",
    autocomplete: "off", "aria-describedby": "tender-coupon-error" });
  const couponApply = element("button", { type: "button", "data-testid": "coupon-apply" }, "Apply");
  const couponError = element("p", { id: "tender-coupon-error", class: "tender-sheet-field-error", role: "alert" });
  const couponFieldset = element("fieldset", {}, element("legend", {}, "Promo code"),
    element("label", { for: "tender-coupon" }, "Code"), element("div", { class: "tender-sheet-row" }, coupon, couponApply),
    couponError);

  const sheetError = element("p", { class: "tender-sheet-error", role: "alert", "data-testid": "sheet-error" });
  const payButton = element("button", { type: "button", class: "tender-sheet-pay", "data-testid": "sheet-pay" }, "Pay");
  const cancelButton = element("button", { type: "button", class: "tender-sheet-cancel", "data-testid": "sheet-cancel" }, "Cancel");
  const dialog = element("div", { class: "tender-sheet", role: "dialog", "aria-modal": "true",
    "aria-labelledby": "tender-sheet-title", "data-testid": "sandbox-sheet", tabindex: "-1" },
  title, note, itemsList, totalRow, contactFieldset, methodsFieldset, couponFieldset, sheetError,
  element("div", { class: "tender-sheet-actions" }, cancelButton, payButton));
  const backdrop = element("div", { class: "tender-sheet-backdrop" }, dialog);

  function setFieldError(input, box, message) {
    box.textContent = message ?? "";
    if (message) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
  }

  function render() {
    itemsList.replaceChildren(...lineItems.map((item) =>
      element("li", {}, element("span", {}, item.label), element("span", {}, money(item.amount, currency)))));
    totalAmount.textContent = money(total.amount, currency);
    if (methods.length === 0) {
      methodsBox.replaceChildren(element("p", {}, "No shipping method delivers to this address."));
    } else {
      methodsBox.replaceChildren(...methods.map((m) => {
        const id = `tender-shipping-${m.identifier}`;
        const radio = element("input", { type: "radio", name: "tender-shipping-method", id, value: m.identifier,
          "data-testid": `shipping-method-${m.identifier}`, checked: m.identifier === selected });
        radio.addEventListener("change", () => selectMethod(m));
        return element("div", { class: "tender-sheet-method" }, radio,
          element("label", { for: id }, `${m.label} (${m.detail}) — ${money(m.amount, currency)}`));
      }));
    }
    payButton.disabled = busy > 0 || contactErrors.length > 0 || methods.length === 0;
  }

  /** Applies a Tender update: totals, methods, and each error on the field it names. */
  function apply(update, scope) {
    total = update.newTotal ?? total;
    lineItems = update.newLineItems ?? lineItems;
    if (Array.isArray(update.newShippingMethods)) {
      methods = update.newShippingMethods;
      if (!methods.some((m) => m.identifier === selected)) selected = methods[0]?.identifier ?? null;
    }
    const errors = Array.isArray(update.errors) ? update.errors : [];
    if (scope === "contact") {
      contactErrors = errors.filter((e) => e.code !== "couponCodeInvalid" && e.code !== "couponCodeExpired");
      const on = (field) => contactErrors.find((e) => e.contactField === field)?.message;
      setFieldError(country, countryError, on("countryCode") ?? on("country"));
      setFieldError(postalCode, postalError, on("postalCode"));
      const other = contactErrors.filter((e) => !["countryCode", "country", "postalCode"].includes(e.contactField));
      sheetError.textContent = other.map((e) => e.message || e.code).join(" ");
    }
    if (scope === "coupon") {
      const couponProblem = errors.find((e) => e.code === "couponCodeInvalid" || e.code === "couponCodeExpired");
      setFieldError(coupon, couponError, couponProblem ? (couponProblem.message || "This code is not valid.") : null);
    }
    render();
  }

  /** One sheet event through the session endpoint; a failure is shown and changes nothing. */
  async function send(suffix, body, scope) {
    busy += 1;
    render();
    const reply = await call(context, "POST", sessionPath(context, suffix), body);
    busy -= 1;
    if (reply.ok && reply.json) {
      if (scope !== "contact") sheetError.textContent = "";
      apply(reply.json, scope);
    } else {
      sheetError.textContent = failureError(reply, "update_failed").message;
      render();
    }
    return reply;
  }

  function contact(full) {
    const c = { countryCode: country.value, postalCode: postalCode.value.trim() };
    if (!full) return c;
    return { ...c, givenName: "Sandbox", familyName: "Shopper", addressLines: [street.value], locality: city.value,
      emailAddress: "shopper@example.com" };
  }

  function selectMethod(method) {
    selected = method.identifier;
    send("/shipping-method", { shippingMethod: { identifier: method.identifier, label: method.label,
      detail: method.detail, amount: method.amount } }, "method");
  }

  return new Promise((resolve, reject) => {
    let lastFailure = null;
    function close() {
      document.removeEventListener("keydown", onKey, true);
      backdrop.remove();
      if (opener && typeof opener.focus === "function") opener.focus();
    }
    function onKey(event) {
      if (event.key === "Escape") { event.preventDefault(); cancel(); }
      if (event.key === "Tab") {
        // Keep focus inside the modal dialog.
        const focusable = [...dialog.querySelectorAll("button, input, select")].filter((n) => !n.disabled);
        if (focusable.length === 0) return;
        const first = focusable[0], last = focusable[focusable.length - 1];
        if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
        else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
      }
    }
    function cancel() {
      close();
      reject(lastFailure ?? new TenderError("canceled", "The shopper closed the sheet."));
    }
    async function payNow() {
      busy += 1;
      render();
      sheetError.textContent = "";
      const minted = await call(context, "POST", "/demo/api/sandbox-token", { sessionId: context.sessionId });
      if (!minted.ok || !minted.json) {
        busy -= 1;
        lastFailure = failureError(minted, "sandbox_token_failed");
        sheetError.textContent = `Payment failed: ${lastFailure.message}`;
        render();
        return;
      }
      const payment = { token: minted.json, shippingContact: contact(true), billingContact: contact(true) };
      const reply = await pay(context, payment);
      busy -= 1;
      const result = reply.json?.authorizationResult;
      if (reply.ok && result && result.status === STATUS_SUCCESS) {
        close();
        resolve(reply.json);
        return;
      }
      lastFailure = reply.ok
        ? new TenderError("payment_declined", "The payment was declined.", { result: reply.json })
        : failureError(reply, "payment_failed");
      for (const e of result?.errors ?? []) if (e.contactField === "postalCode") setFieldError(postalCode, postalError, e.message);
      sheetError.textContent = `Payment failed: ${lastFailure.message}`;
      render();
    }

    country.addEventListener("change", () => send("/shipping-contact", { shippingContact: contact(false) }, "contact"));
    postalCode.addEventListener("change", () => send("/shipping-contact", { shippingContact: contact(false) }, "contact"));
    couponApply.addEventListener("click", () => send("/coupon-code", { couponCode: coupon.value.trim() }, "coupon"));
    coupon.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); couponApply.click(); }
    });
    payButton.addEventListener("click", payNow);
    cancelButton.addEventListener("click", cancel);
    document.addEventListener("keydown", onKey, true);

    render();
    document.body.append(backdrop);
    dialog.focus();
    // Safari's opening order: the card, then the (redacted) shipping contact.
    send("/payment-method", { paymentMethod: { displayName: "Visa 1111", network: "Visa", type: "debit" } }, "method")
      .then(() => send("/shipping-contact", { shippingContact: contact(false) }, "contact"));
  });
}

// MARK: - Entry point

/**
 * Starts the checkout of one session. Options: sessionId and clientSecret (from Tender's session);
 * session (that session object as Tender returned it: with it the sheet starts synchronously, which
 * Safari requires inside the click handler; without it the session is fetched first); baseURL (Tender's
 * origin, "" for the page's own); sandbox (open the sandbox sheet when Apple Pay is absent);
 * timeoutMilliseconds (per call, at most 24 s: with the 3 s confirmation of a lost payment answer it
 * stays inside the sheet's 30 s).
 */
export function start(options) {
  const { sessionId, clientSecret } = options ?? {};
  if (typeof sessionId !== "string" || typeof clientSecret !== "string") {
    return Promise.reject(new TenderError("invalid_options", "sessionId and clientSecret are required."));
  }
  const budget = Number.isInteger(options.timeoutMilliseconds) ? options.timeoutMilliseconds : REQUEST_TIMEOUT_MILLISECONDS;
  const context = {
    sessionId, clientSecret,
    baseURL: (options.baseURL ?? "").replace(/\/+$/, ""),
    timeoutMilliseconds: Math.max(1000, Math.min(budget, SHEET_TIMEOUT_MILLISECONDS - 6000)),
  };
  const sandbox = options.sandbox === true;
  if (options.session && options.session.id === sessionId && options.session.paymentRequest) {
    return begin(context, options.session, sandbox);
  }
  return call(context, "GET", sessionPath(context, "")).then((loaded) => {
    if (!loaded.ok || !loaded.json) throw failureError(loaded, "session_unavailable");
    return begin(context, loaded.json, sandbox);
  });
}

function begin(context, session, sandbox) {
  if (session.status && session.status !== "open") {
    return Promise.reject(new TenderError("session_not_open", `The checkout session is ${session.status}.`));
  }
  const Session = globalThis.ApplePaySession;
  if (typeof Session === "function" && (typeof Session.canMakePayments !== "function" || Session.canMakePayments())) {
    return runApplePay(context, session);
  }
  if (sandbox) return runSandboxSheet(context, session);
  return Promise.reject(new TenderError("apple_pay_unavailable", "Apple Pay is not available in this browser."));
}

export const TenderCheckout = { start };
export default TenderCheckout;
