// Tender's operator console: payments and refunds, the finance balance trend, settlement reports.
// The API key lives in sessionStorage only (gone when the tab closes) and goes to this origin alone.
const KEY_STORAGE = "tender.console.apiKey";
const SVG = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);

function node(tag, attributes = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined && v !== null) n.setAttribute(k, v);
  n.append(...children);
  return n;
}

function svg(tag, attributes = {}, ...children) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attributes)) n.setAttribute(k, String(v));
  n.append(...children);
  return n;
}

function apiKey() { return sessionStorage.getItem(KEY_STORAGE); }

/** A call to the API with the operator's key: {ok, status, json}. */
async function api(method, path, body, headers = {}) {
  const init = { method, headers: { Authorization: `Bearer ${apiKey()}`, Accept: "application/json", ...headers },
    cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    const response = await fetch(path, init);
    const json = await response.json().catch(() => null);
    if (response.status === 401) signOut("The API key was refused; sign in again.");
    return { ok: response.ok, status: response.status, json };
  } catch {
    return { ok: false, status: 0, json: null };
  }
}

function problemText(reply) {
  return reply.json?.detail ? `${reply.json.detail} (${reply.json.code})` : `HTTP ${reply.status || "network error"}`;
}

// MARK: - Money without floating point

/** A decimal string ("-12.30") as BigInt minor units and its fraction digits. */
function toMinor(amount) {
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(amount));
  if (!match) return { minor: 0n, digits: 0 };
  const fraction = match[3] ?? "";
  const minor = BigInt(match[2] + fraction);
  return { minor: match[1] ? -minor : minor, digits: fraction.length };
}

function formatMinor(minor, digits) {
  const negative = minor < 0n;
  let text = (negative ? -minor : minor).toString().padStart(digits + 1, "0");
  if (digits > 0) text = `${text.slice(0, -digits)}.${text.slice(-digits)}`;
  return negative ? `-${text}` : text;
}

// MARK: - Sign in

function signOut(message) {
  sessionStorage.removeItem(KEY_STORAGE);
  $("signed-in").hidden = true;
  $("sign-in").hidden = false;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  $("sign-in-error").textContent = message ?? "";
}

async function signIn(key) {
  sessionStorage.setItem(KEY_STORAGE, key);
  const me = await api("GET", "/v1/merchant");
  if (!me.ok) {
    signOut(me.status === 401 ? "That API key was not accepted." : problemText(me));
    return;
  }
  $("sign-in").hidden = true;
  $("signed-in").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = `${me.json.displayName} (${me.json.merchantId})`;
  await refresh();
}

async function refresh() {
  await Promise.all([loadPayments(), loadFinance(), loadReports()]);
}

// MARK: - Payments and refunds

async function loadPayments() {
  const reply = await api("GET", "/v1/payments?limit=50");
  if (!reply.ok) {
    $("payments-status").textContent = `Payments unavailable: ${problemText(reply)}`;
    return;
  }
  const payments = reply.json.data ?? [];
  $("payments-status").textContent = payments.length === 0 ? "No payments yet." :
    `${payments.length} payment${payments.length === 1 ? "" : "s"}${reply.json.hasMore ? " (newest 50)" : ""}.`;
  const rows = await Promise.all(payments.map(async (p) => paymentRow(p, await refundsOf(p))));
  $("payments").replaceChildren(...rows);
}

/** The payment's refunds, when the server lists them; null when it does not (older servers). */
async function refundsOf(payment) {
  const reply = await api("GET", `/v1/payments/${encodeURIComponent(payment.id)}/refunds`);
  if (!reply.ok) return null;
  return Array.isArray(reply.json) ? reply.json : reply.json?.data ?? reply.json?.refunds ?? null;
}

function paymentRow(p, refunds) {
  const refundedText = refunds === null
    ? (p.amountRefunded !== undefined ? `${p.amountRefunded} refunded` : "not listed by this server")
    : refunds.length === 0 ? "none" : refunds.map((r) => `${r.amount} ${r.status}`).join(", ");
  const refundCell = node("td");
  if (p.status === "succeeded") {
    const amountInput = node("input", { type: "text", inputmode: "decimal", value: p.amount ?? "", size: "8",
      "aria-label": `Refund amount for ${p.id}`, "data-testid": `refund-amount-${p.id}` });
    const button = node("button", { type: "button", "data-testid": `refund-${p.id}` }, "Refund");
    const message = node("span", { role: "status", class: "muted", "data-testid": `refund-result-${p.id}` });
    button.addEventListener("click", async () => {
      button.disabled = true;
      const reply = await api("POST", `/v1/payments/${encodeURIComponent(p.id)}/refunds`,
        { amount: amountInput.value.trim() }, { "Idempotency-Key": crypto.randomUUID() });
      button.disabled = false;
      message.textContent = reply.ok ? `Refund ${reply.json.id} ${reply.json.status}` : `Refund refused: ${problemText(reply)}`;
      if (reply.ok) {
        refunded.textContent = refunded.textContent === "none" || refunded.textContent === "not listed by this server"
          ? `${reply.json.amount} ${reply.json.status}` : `${refunded.textContent}, ${reply.json.amount} ${reply.json.status}`;
        loadFinance();
      }
    });
    refundCell.append(amountInput, " ", button, " ", message);
  }
  const refunded = node("td", { "data-testid": `refunds-${p.id}` }, refundedText);
  return node("tr", { "data-testid": `payment-row-${p.id}`, "data-payment-id": p.id },
    node("td", {}, node("code", {}, p.id)),
    node("td", {}, (p.createdAt ?? "").replace("T", " ").replace(/\.\d+Z$/, "Z")),
    node("td", { class: "number" }, `${p.amount ?? p.amountMinor} ${p.currencyCode}`),
    node("td", {}, node("span", { class: `badge ${p.status}`, "data-testid": `status-${p.id}` }, p.status)),
    node("td", {}, p.network ? `${p.network} ${p.last4 ?? ""}` : "—"),
    refunded, refundCell);
}

// MARK: - Balance trend

let accounts = [];

async function loadFinance() {
  const reply = await api("GET", "/v1/finance/accounts");
  if (!reply.ok) {
    $("balance-now").textContent = `Finance store unavailable: ${problemText(reply)}`;
    return;
  }
  accounts = reply.json.accounts ?? [];
  const select = $("account");
  const previous = select.value;
  select.replaceChildren(...accounts.map((a) => node("option", { value: a.id }, `${a.displayName} (${a.currencyCode})`)));
  if (accounts.some((a) => a.id === previous)) select.value = previous;
  if (accounts.length === 0) {
    $("balance-now").textContent = "No finance accounts yet: they appear with the first payment.";
    $("chart").replaceChildren();
    return;
  }
  await drawTrend(select.value);
}

async function drawTrend(accountID) {
  const q = encodeURIComponent(accountID);
  const [balances, transactions] = await Promise.all([
    api("GET", `/v1/finance/account-balances?accountID=${q}`),
    api("GET", `/v1/finance/transactions?accountID=${q}&limit=500`),
  ]);
  if (!balances.ok || !transactions.ok) {
    $("balance-now").textContent = `Finance store unavailable: ${problemText(balances.ok ? transactions : balances)}`;
    return;
  }
  const balance = (balances.json.accountBalances ?? [])[0];
  const current = balance?.currentBalance?.available ?? balance?.currentBalance?.booked;
  const list = (transactions.json.transactions ?? []).filter((t) => t.status !== "rejected")
    .reverse(); // newest first from the API; chronological here
  // The balance after each transaction: credits add, debits subtract, in minor units.
  let running = 0n;
  let digits = current ? toMinor(current.amount.amount).digits : 2;
  const points = list.map((t) => {
    const { minor, digits: d } = toMinor(t.transactionAmount.amount);
    digits = d;
    running += t.creditDebitIndicator === "debit" ? -minor : minor;
    return { at: t.transactionDate, minor: running, transaction: t };
  });
  const currency = current?.amount?.currencyCode ?? list[0]?.transactionAmount?.currencyCode ?? "";
  if (current) {
    const sign = current.creditDebitIndicator === "debit" ? "-" : "";
    $("balance-now").textContent = `Current balance: ${sign}${current.amount.amount} ${currency} (as of ${current.asOfDate}); `
      + `after all ${points.length} transactions: ${formatMinor(running, digits)} ${currency}.`;
  } else {
    $("balance-now").textContent = "No balance recorded yet.";
  }
  const currentMinor = current
    ? (current.creditDebitIndicator === "debit" ? -toMinor(current.amount.amount).minor : toMinor(current.amount.amount).minor)
    : null;
  $("chart").replaceChildren(chart(points, digits, currency, currentMinor));
}

/** A line chart in SVG, one circle per transaction; scaled in BigInt, placed in whole pixels. */
function chart(points, digits, currency, currentMinor) {
  const width = 640, height = 220, pad = 24, left = 64, right = 40;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "trend",
    "aria-label": `Balance after each of ${points.length} transactions` });
  root.append(svg("title", {}, "Balance trend"));
  if (points.length === 0) {
    root.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "No transactions yet"));
    return root;
  }
  let low = 0n, high = 0n;
  for (const m of [...points.map((p) => p.minor), currentMinor ?? 0n]) { if (m < low) low = m; if (m > high) high = m; }
  if (high === low) high = low + 1n;
  const span = high - low;
  const x = (i) => (points.length === 1 ? width / 2 : left + Math.round((i * (width - left - right)) / (points.length - 1)));
  const y = (minor) => height - pad - Number(((minor - low) * BigInt(height - 2 * pad)) / span);
  root.append(svg("line", { x1: left, x2: width - right, y1: y(0n), y2: y(0n), class: "zero" }));
  root.append(svg("text", { x: 4, y: y(high) + 4, class: "axis" }, formatMinor(high, digits)));
  root.append(svg("text", { x: 4, y: y(low) + 4, class: "axis" }, formatMinor(low, digits)));
  if (currentMinor !== null) {
    root.append(svg("line", { x1: left, x2: width - right, y1: y(currentMinor), y2: y(currentMinor), class: "current",
      "data-testid": "balance-current" }, svg("title", {}, `Current balance ${formatMinor(currentMinor, digits)} ${currency}`)));
    root.append(svg("text", { x: width - right + 6, y: y(currentMinor) + 4, class: "axis" }, "now"));
  }
  root.append(svg("polyline", { points: points.map((p, i) => `${x(i)},${y(p.minor)}`).join(" "), class: "line" }));
  points.forEach((p, i) => {
    const t = p.transaction;
    const circle = svg("circle", { cx: x(i), cy: y(p.minor), r: 5, class: `point ${t.creditDebitIndicator}`,
      "data-testid": "balance-point", "data-transaction-id": t.id, "data-description": t.transactionDescription ?? "",
      "data-balance": formatMinor(p.minor, digits), tabindex: "0" });
    circle.append(svg("title", {}, `${p.at}: ${t.creditDebitIndicator === "debit" ? "−" : "+"}${t.transactionAmount.amount} `
      + `${currency}, ${t.transactionDescription ?? t.transactionType} → ${formatMinor(p.minor, digits)} ${currency}`));
    root.append(circle);
  });
  return root;
}

// MARK: - Settlement reports

async function loadReports() {
  const reply = await api("GET", "/v1/settlement-reports?limit=20");
  if (reply.status === 404 || reply.status === 405) {
    // Servers without the list endpoint: reports can still be opened by id.
    $("reports-status").textContent = "This server does not list settlement reports; open one by its id.";
    $("reports-table").hidden = true;
    return;
  }
  if (!reply.ok) {
    $("reports-status").textContent = `Settlement reports unavailable: ${problemText(reply)}`;
    return;
  }
  const reports = reply.json.data ?? reply.json.reports ?? [];
  $("reports-status").textContent = reports.length === 0 ? "No settlement reports imported yet." : "";
  $("reports-table").hidden = reports.length === 0;
  const detailed = await Promise.all(reports.map(async (r) => {
    if (r.counts) return r;
    const one = await api("GET", `/v1/settlement-reports/${encodeURIComponent(r.id)}`);
    return one.ok ? one.json : r;
  }));
  $("reports").replaceChildren(...detailed.map((r) => node("tr", { "data-testid": `report-row-${r.id}` },
    node("td", {}, node("code", {}, r.id)), node("td", {}, r.format ?? ""),
    node("td", { class: "number" }, String(r.lineCount ?? "")), node("td", {}, countsList(r.counts)))));
}

function countsList(counts) {
  const entries = Object.entries(counts ?? {}).filter(([, n]) => n > 0).sort(([a], [b]) => (a < b ? -1 : 1));
  if (entries.length === 0) return node("span", { class: "muted" }, "no lines");
  return node("ul", { class: "counts" }, ...entries.map(([category, n]) =>
    node("li", { "data-category": category }, `${category.replaceAll("_", " ")}: ${n}`)));
}

async function openReport(id) {
  const reply = await api("GET", `/v1/settlement-reports/${encodeURIComponent(id)}`);
  $("report-detail").replaceChildren(reply.ok
    ? node("div", {}, node("h3", {}, `Report ${reply.json.id} (${reply.json.format}, ${reply.json.lineCount} line${reply.json.lineCount === 1 ? "" : "s"})`),
      countsList(reply.json.counts))
    : node("p", { class: "error", role: "alert" }, `Report unavailable: ${problemText(reply)}`));
}

// MARK: - Wiring

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    $("api-key").value = "";
    if (key) signIn(key);
  });
  $("sign-out").addEventListener("click", () => signOut());
  $("refresh").addEventListener("click", refresh);
  $("account").addEventListener("change", () => drawTrend($("account").value));
  $("report-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("report-id").value.trim();
    if (id) openReport(id);
  });
  if (apiKey()) signIn(apiKey()); else signOut();
});
