"""What DynamoDB bills for one call, in write and read capacity units (Python stdlib only).

delay_proxy.py --bill asks DynamoDB (the emulator) for each data-plane call's bill by adding
`"ReturnConsumedCapacity": "TOTAL"` to the request (`RequestFramer`), pairs each answer with
its call (`ResponseParser`), and hands each call (its request body, status and response body)
to a `Ledger`, which bills it and adds it up; bench.py prints the ledgers with
`where_units_went` and `sources`.

Where the bill comes from:
- A call that succeeded: the response's `ConsumedCapacity`. dynoxide 1.2.1 fills it as AWS
  does (checked against the rules below: a put, update or delete is the larger of the old
  and the new item, per KB rounded up, at least 1; a transactional write 2 per item per KB,
  each item rounded before doubling; reads per 4 KB, half for eventually consistent ones;
  BatchGetItem and BatchWriteItem per item). The ledger also computes its own estimate of
  the same call and counts the calls where the two differ (`mismatches`).
- A call that failed: neither AWS nor dynoxide return `ConsumedCapacity` then (AWS omits it
  for a failed conditional write and a cancelled transaction alike), so the ledger bills it
  from the request and the response, by AWS's rules:
  - a conditional `PutItem`/`UpdateItem`/`DeleteItem` whose condition failed
    (`ConditionalCheckFailedException`) still consumes write units: "If the expression
    evaluates to false, DynamoDB still consumes write capacity units from the table. The
    amount of consumed write capacity units depends on the size of the item. This item can
    be an existing item in the table or a new one you're attempting to create or update"
    (the larger of the two), at least 1 (docs.aws.amazon.com/amazondynamodb/latest/
    developerguide/read-write-operations.html, "Capacity unit consumption for write
    operations"). The item is the larger of the one the response returned
    (`ReturnValuesOnConditionCheckFailure: ALL_OLD`) and the request's estimate below.
  - a cancelled `TransactWriteItems` (`TransactionCanceledException`) is billed as if it had
    gone through, 2 units per item per KB for every item of it, the ones that did not cancel
    it included: "DynamoDB performs two underlying writes for each item, one to prepare the
    transaction and one to commit it, so a transactional write of an item up to 1 KB
    consumes two write units. This capacity is consumed even when the transaction is
    canceled (for example, because a condition check fails)" (the same page). A cancelled
    `TransactGetItems` is billed 2 read units per item (the items' sizes are unknown).
  - any other error (validation, throttling, a 5xx, a `TransactionConflictException` on a
    single-item write) is billed nothing and counted by its type (`unbilled`).
- A `BatchGetItem` is billed per key it was asked for and processed, as one `GetItem` each:
  per 4 KB of the item found, 1 unit for a key with no item, halved when eventually
  consistent (its `ConsumedCapacity` when present, which dynoxide fills so).
- A `BatchExecuteStatement` (PartiQL) answers 200 whatever its statements did, each one's
  error in `Responses[i].Error`; it is billed per statement: a write that succeeded, and one
  whose condition failed (`ConditionalCheckFailed`, or `DuplicateItem` for an `INSERT` of an
  existing item, a conditional put), 1 write unit per KB of the item as for `PutItem` and
  `UpdateItem` (the larger of the statement's estimate below and the `Error.Item` returned,
  at least 1). A statement refused (`ValidationError`), throttled or failed otherwise is
  billed nothing and counted (`unbilled`, `CODE (statement)`): AWS's docs say nothing of
  capacity for a refused statement (the API reference lists the codes, the capacity page
  covers failed conditions only), so 0 is an assumption. dynoxide 1.2.1 puts 1 unit per
  refused statement into `ConsumedCapacity`, whatever the item: the ledger takes those off.
  dynoxide omits `ConsumedCapacity` when every statement of a call failed; such a call is
  billed from the statements and their errors.
- Control-plane calls (DescribeTable, CreateTable...) are not billed per request.

Item size is AWS's: each attribute's name (UTF-8 bytes) plus its value: a string's UTF-8
bytes, a binary's bytes, a number 1 byte per two significant digits plus 1, a boolean or null
1, a set the sum of its elements, a list or map 3 bytes plus its elements plus 1 byte per
element. What a request will write is estimated from it: a `Put`'s item; an `Update`'s key
plus every name and value its expressions mention (an upper estimate of the new item); a
`Delete`'s or `ConditionCheck`'s key; a PartiQL write statement's every quoted name but the
table's plus every parameter (its condition's too: an upper estimate). The estimate only
matters across a 1 KB boundary.
"""
import json
import math
import re
import statistics

KB = 1024
# A head longer than this is not HTTP as we know it (the framers below give up on it).
MAX_HEAD = 1 << 20
READ_OPS = frozenset(("GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"))
WRITE_OPS = frozenset(("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"))
# The operations whose requests take ReturnConsumedCapacity (the data plane).
BILLED_OPS = READ_OPS | WRITE_OPS | frozenset(("ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"))


def number_size(text):
    """A number: 1 byte per two significant digits (leading and trailing zeros trimmed), + 1."""
    digits = text.lstrip("+-").lower().split("e", 1)[0].replace(".", "")
    digits = digits.strip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def value_size(v):
    """The size of one attribute value (a DynamoDB JSON `{"S": ...}` object), in bytes."""
    if not isinstance(v, dict) or len(v) != 1:
        return 0
    (kind, x), = v.items()
    if kind == "S":
        return len(x.encode())
    if kind == "N":
        return number_size(x)
    if kind == "B":
        return (len(x) * 3) // 4 - x.count("=")  # base64 in JSON
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in x)
    if kind == "NS":
        return sum(number_size(s) for s in x)
    if kind == "BS":
        return sum((len(s) * 3) // 4 - s.count("=") for s in x)
    if kind == "L":
        return 3 + sum(value_size(e) + 1 for e in x)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(e) + 1 for k, e in x.items())
    return 0


def item_size(item):
    """The size of an item (attribute name -> value), in bytes; 0 for none."""
    if not isinstance(item, dict):
        return 0
    return sum(len(k.encode()) + value_size(v) for k, v in item.items())


def units(size, per):
    """Capacity units for an item of `size` bytes, `per` bytes a unit, rounded up, at least 1."""
    return max(1, math.ceil(size / per))


def written_size(op, action):
    """An estimate of the item a write action (a request, or a transaction's action) writes."""
    if op == "Put":
        return item_size(action.get("Item"))
    size = item_size(action.get("Key"))
    if op == "Update":
        names = action.get("ExpressionAttributeNames") or {}
        values = action.get("ExpressionAttributeValues") or {}
        size += sum(len(n.encode()) for n in names.values()) + sum(value_size(v) for v in values.values())
    return size


def split(op, consumed):
    """(write, read) units of a `ConsumedCapacity` (one object or a list of them)."""
    write = read = 0.0
    for c in consumed if isinstance(consumed, list) else [consumed]:
        if not isinstance(c, dict):
            continue
        if "WriteCapacityUnits" in c or "ReadCapacityUnits" in c:
            # Transactions say which: an idempotent replay of a TransactWriteItems is a read.
            write += c.get("WriteCapacityUnits", 0.0)
            read += c.get("ReadCapacityUnits", 0.0)
        elif op in READ_OPS:
            read += c.get("CapacityUnits", 0.0)
        else:
            write += c.get("CapacityUnits", 0.0)
    return write, read


TRANSACT_KINDS = ("Put", "Update", "Delete", "ConditionCheck")


def transact_actions(req):
    """(kind, action) of each item of a TransactWriteItems request."""
    out = []
    for entry in req.get("TransactItems") or []:
        for kind in TRANSACT_KINDS:
            if isinstance(entry, dict) and kind in entry:
                out.append((kind, entry[kind]))
                break
    return out


# A statement's verb and table, and the quoted names after them ('a' in INSERT's VALUE,
# "a" elsewhere).
STATEMENT_HEAD = re.compile(r"""^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|SELECT\s.*?\sFROM)\s+("[^"]*"|\S+)""",
                            re.IGNORECASE | re.DOTALL)
QUOTED = re.compile(r""""([^"]*)"|'([^']*)'""")
# Statement errors that are failed conditions, billed as DynamoDB bills those.
STATEMENT_CHANGED = frozenset(("ConditionalCheckFailed", "DuplicateItem"))


def statement_size(statement):
    """An estimate of the item a PartiQL write statement writes (the module docstring)."""
    text = str(statement.get("Statement", ""))
    head = STATEMENT_HEAD.match(text)
    rest = text[head.end():] if head else text
    names = {a or b for a, b in QUOTED.findall(rest)}
    return sum(len(n.encode()) for n in names) + sum(value_size(v) for v in statement.get("Parameters") or [])


# The partition key value of an epoch record of `lock_acquire: 'epochs'` (`#epoch:OWNER:N`;
# transforms/src/kv_store/aws_dynamodb): keys are written pending in an epoch (status
# `epoch`, with `lock_epoch` and `lock_slot`) and a batch of them is committed with one
# UpdateItem of their epoch record (ADD to its `lock_committed` set), or aborted slot by slot
# by a taker (ADD to `lock_aborted`).
EPOCH_MARK = "#epoch:"


def is_epoch_key(key):
    """Whether a request's `Key` (attribute -> value) is an epoch record's."""
    return isinstance(key, dict) and any(
        isinstance(v, dict) and EPOCH_MARK in str(v.get("S", "")) for v in key.values())


def epoch_update(req):
    """What an UpdateItem request does to an epoch record: `commit` (its update expression
    adds to `lock_committed`), `abort` (to `lock_aborted`), else `epoch`; None when it is not
    an epoch record's."""
    if not isinstance(req, dict) or not is_epoch_key(req.get("Key")):
        return None
    expr = str(req.get("UpdateExpression") or "")
    names = req.get("ExpressionAttributeNames") or {}
    for placeholder in sorted(names, key=len, reverse=True):  # `#a1` before `#a`
        expr = expr.replace(placeholder, str(names[placeholder]))
    if "lock_aborted" in expr:
        return "abort"
    if "lock_committed" in expr:
        return "commit"
    return "epoch"


def epoch_read(req):
    """Whether a BatchGetItem request reads epoch records only."""
    keys = [k for t in ((req or {}).get("RequestItems") or {}).values() if isinstance(t, dict)
            for k in t.get("Keys") or []]
    return bool(keys) and all(is_epoch_key(k) for k in keys)


def is_select(statement):
    return str(statement.get("Statement", "")).lstrip()[:6].upper() == "SELECT"


def statements_bill(req, resp):
    """(write, read, {error code: statements billed nothing}, statements that failed) of a
    BatchExecuteStatement, from its statements and their answers."""
    write = read = 0.0
    unbilled, failed = {}, 0
    statements = req.get("Statements") or []
    answers = resp.get("Responses") or []
    for i, statement in enumerate(statements):
        answer = answers[i] if i < len(answers) and isinstance(answers[i], dict) else {}
        error = answer.get("Error")
        if is_select(statement):
            if not error:
                size = units(item_size(answer.get("Item")), 4 * KB)
                read += size if statement.get("ConsistentRead") else size / 2
            continue
        if not error:
            write += units(statement_size(statement), KB)
            continue
        failed += 1
        code = str(error.get("Code", "error")) if isinstance(error, dict) else "error"
        if code in STATEMENT_CHANGED:
            write += units(max(statement_size(statement), item_size(error.get("Item"))), KB)
        else:
            unbilled[code] = unbilled.get(code, 0) + 1
    return write, read, unbilled, failed


def batch_get_bill(req, resp):
    """(0, read) of a BatchGetItem that succeeded: a GetItem per key processed."""
    read = 0.0
    unprocessed = resp.get("UnprocessedKeys") or {}
    found = resp.get("Responses") or {}
    for table, asked in (req.get("RequestItems") or {}).items():
        left = (unprocessed.get(table) or {}).get("Keys") or []
        items = found.get(table) or []
        n = len(asked.get("Keys") or []) - len(left)
        total = sum(units(item_size(item), 4 * KB) for item in items) + max(0, n - len(items))
        read += total if asked.get("ConsistentRead") else total / 2
    return 0.0, read


def estimate_success(op, req, resp):
    """Our own bill of a call that succeeded, (write, read), or None where we cannot tell."""
    if op == "PutItem":
        return units(max(written_size("Put", req), item_size(resp.get("Attributes"))), KB), 0.0
    if op == "UpdateItem":
        return units(max(written_size("Update", req), item_size(resp.get("Attributes"))), KB), 0.0
    if op == "DeleteItem":
        old = resp.get("Attributes")
        return (units(item_size(old), KB), 0.0) if old else None
    if op == "TransactWriteItems":
        return 2.0 * sum(units(written_size(kind, a), KB) for kind, a in transact_actions(req)), 0.0
    if op == "GetItem":
        size = units(item_size(resp.get("Item")), 4 * KB)
        return 0.0, size if req.get("ConsistentRead") else size / 2
    if op == "BatchGetItem":
        return batch_get_bill(req, resp)
    if op == "BatchExecuteStatement":
        return statements_bill(req, resp)[:2]
    return None


def bill_failure(op, req, resp):
    """(write, read, outcome) of a call that failed: billed as DynamoDB bills it (above)."""
    kind = str(resp.get("__type", "")).rsplit("#", 1)[-1] or "error"
    if kind == "ConditionalCheckFailedException" and op in ("PutItem", "UpdateItem", "DeleteItem"):
        size = max(written_size(op[: -len("Item")], req), item_size(resp.get("Item")))
        return float(units(size, KB)), 0.0, "condition failed"
    if kind == "TransactionCanceledException" and op == "TransactWriteItems":
        reasons = resp.get("CancellationReasons") or []
        total = 0
        for i, (action_kind, action) in enumerate(transact_actions(req)):
            old = reasons[i].get("Item") if i < len(reasons) and isinstance(reasons[i], dict) else None
            total += units(max(written_size(action_kind, action), item_size(old)), KB)
        return 2.0 * total, 0.0, "cancelled"
    if kind == "TransactionCanceledException" and op == "TransactGetItems":
        n = len(req.get("TransactItems") or [])
        return 0.0, 2.0 * n, "cancelled"
    return 0.0, 0.0, kind


class Ledger:
    """The bill of every call seen: units by kind of call and outcome, and where they came from."""

    def __init__(self):
        self.write = 0.0
        self.read = 0.0
        self.kinds = {}  # "UpdateItem ok" -> {"calls": n, "write": w, "read": r}
        self.from_response = 0.0  # units read from ConsumedCapacity
        self.estimated = 0.0  # units this ledger computed (failures; successes without the field)
        self.unbilled = {}  # error type -> calls billed nothing
        self.mismatches = 0  # successes whose ConsumedCapacity differs from our estimate
        self.mismatch_example = None  # the first of them

    def add(self, op, label, status, req_body, resp_body):
        """Bills one call: `op` is its operation (UpdateItem...), `label` what it did (e.g.
        `TransactWriteItems/acquire`), `status` the HTTP status. Returns the parsed answer
        (None when not billed)."""
        if op not in BILLED_OPS:
            return None
        try:
            req = json.loads(req_body) if req_body else {}
            resp = json.loads(resp_body) if resp_body else {}
        except ValueError:
            self.unbilled["unparsed"] = self.unbilled.get("unparsed", 0) + 1
            return None
        if not isinstance(req, dict) or not isinstance(resp, dict):
            self.unbilled["unparsed"] = self.unbilled.get("unparsed", 0) + 1
            return None
        if status == 200:
            outcome = "ok"
            ours = estimate_success(op, req, resp)
            consumed = resp.get("ConsumedCapacity")
            refused = 0
            if op == "BatchExecuteStatement":
                _, _, unbilled, failed = statements_bill(req, resp)
                for code, n in unbilled.items():
                    self.unbilled[f"{code} (statement)"] = self.unbilled.get(f"{code} (statement)", 0) + n
                refused = unbilled.get("ValidationError", 0)
                total = len(req.get("Statements") or [])
                if failed:
                    outcome = "every statement failed" if failed == total else "some statements failed"
            if consumed is not None:
                kind = "BatchGetItem" if op == "BatchExecuteStatement" and all(
                    is_select(x) for x in req.get("Statements") or [{}]) else op
                write, read = split(kind, consumed)
                # dynoxide's unit for each refused statement, which AWS is not known to bill.
                write = max(0.0, write - refused)
                self.from_response += write + read
                if ours is not None and (abs(ours[0] - write) > 1e-9 or abs(ours[1] - read) > 1e-9):
                    self.mismatches += 1
                    self.mismatch_example = self.mismatch_example or f"{op}: ConsumedCapacity {write:g} write + {read:g} read, estimate {ours}"
            elif ours is not None:
                write, read = ours
                self.estimated += write + read
            else:
                write = read = 0.0
                self.unbilled["no ConsumedCapacity"] = self.unbilled.get("no ConsumedCapacity", 0) + 1
        else:
            write, read, outcome = bill_failure(op, req, resp)
            if write or read:
                self.estimated += write + read
            else:
                self.unbilled[outcome] = self.unbilled.get(outcome, 0) + 1
        self.write += write
        self.read += read
        k = self.kinds.setdefault(f"{label} {outcome}", {"calls": 0, "write": 0.0, "read": 0.0})
        k["calls"] += 1
        k["write"] += write
        k["read"] += read
        return resp

    def snapshot(self):
        return {
            "write": self.write,
            "read": self.read,
            "kinds": {k: dict(v) for k, v in sorted(self.kinds.items())},
            "from_response": self.from_response,
            "estimated": self.estimated,
            "unbilled": dict(self.unbilled),
            "mismatches": self.mismatches,
            "mismatch_example": self.mismatch_example,
        }


# --- reports ----------------------------------------------------------------------------


KIND_NAMES = {  # in the order shown
    "BatchGetItem": "read (BatchGetItem)",
    "TransactWriteItems/acquire": "take (transaction)",
    "BatchExecuteStatement/acquire": "take (statements)",
    "BatchGetItem/epoch": "read epochs (BatchGetItem)",
    "UpdateItem": "take (UpdateItem)",
    "UpdateItem/abort": "abort a slot (epoch UpdateItem)",
    "TransactWriteItems/commit": "commit (transaction)",
    "BatchExecuteStatement/commit": "commit (statements)",
    "UpdateItem/commit": "commit (epoch UpdateItem)",
    "UpdateItem/epoch": "other (epoch UpdateItem)",
    "TransactWriteItems/renew": "renew (transaction)",
    "TransactWriteItems/release": "release (transaction)",
    "TransactWriteItems/abandon": "abandon (transaction)",
}


def where_units_went(bills, n):
    """`take (transaction) 2.00 + commit (transaction) 2.00`: the median write units (and
    read units, `+R read`, or `R read` alone) per message of each kind of call and outcome,
    over ledger snapshots of runs of n messages."""
    order = list(KIND_NAMES)
    kinds = sorted({k for b in bills for k in b["kinds"]},
                   key=lambda k: (order.index(k.split(" ")[0]) if k.split(" ")[0] in order else len(order), k))
    parts = []
    for k in kinds:
        per = [b["kinds"].get(k, {"write": 0.0, "read": 0.0}) for b in bills]
        write = statistics.median(v["write"] / n for v in per)
        read = statistics.median(v["read"] / n for v in per)
        if not (write or read):
            continue
        call, _, outcome = k.partition(" ")
        name = KIND_NAMES.get(call, call) + ("" if outcome == "ok" else f", {outcome}")
        if not write:
            parts.append(f"{name} {read:.2f} read")
        else:
            parts.append(f"{name} {write:.2f}" + (f" (+{read:.2f} read)" if read else ""))
    return " + ".join(parts) or "-"


def unbilled_of(bills):
    """The calls (and statements) billed nothing in these ledger snapshots, by error type."""
    unbilled = {}
    for b in bills:
        for k, v in b["unbilled"].items():
            unbilled[k] = unbilled.get(k, 0) + v
    return unbilled


def sources(bills):
    """One line: where the units of these ledger snapshots came from, and what was not billed."""
    from_response = sum(b["from_response"] for b in bills)
    estimated = sum(b["estimated"] for b in bills)
    total = (from_response + estimated) or 1.0
    unbilled = unbilled_of(bills)
    example = next((b["mismatch_example"] for b in bills if b["mismatches"]), None)
    return (f"(units: {from_response / total:.0%} from the emulator's ConsumedCapacity (calls that succeeded), "
            f"{estimated / total:.0%} billed from the calls (failed conditional writes, cancelled transactions, "
            f"statement calls whose every statement failed: billing.py); {sum(b['mismatches'] for b in bills)} "
            "successful calls where billing.py's estimate "
            "differs from ConsumedCapacity"
            + (f", the first: {example}" if example else "")
            + (f"; errors billed nothing: {unbilled}" if unbilled else "") + ")")


# --- pairing calls with their answers, on the wire (delay_proxy.py --bill) -------------


def head_fields(head):
    """(X-Amz-Target or `-`, Content-Length or None, chunked) of a request head."""
    target, length, chunked = "-", None, False
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = name.strip().lower()
        if name == b"x-amz-target":
            target = value.strip().decode("latin-1")
        elif name == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                length = -1
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    return target, length, chunked


INJECT = b'"ReturnConsumedCapacity":"TOTAL"'
ASKED = b'"ReturnConsumedCapacity"'


class RequestFramer:
    """--bill: frames the client's requests whole (head and Content-Length body), adds
    `"ReturnConsumedCapacity": "TOTAL"` to the body of each data-plane call that does not
    ask for it (fixing Content-Length; dynoxide does not check the SigV4 signature, which
    covers the body), and hands each on (`emit`) once read to its end, queueing what
    billing.py needs to bill its answer in `calls`. A request is held until its last byte
    arrived; its delay counts from then. What it cannot frame (a chunked body, a head
    without a length or over MAX_HEAD) ends billing on the connection: the rest is passed on
    as it comes, and the connection is reported as unparsed."""

    def __init__(self, counts, emit, calls):
        self.counts = counts
        self.emit = emit
        self.calls = calls  # what was sent, in order, to pair with the answers
        self.buf = bytearray()
        self.head = None  # the head of the request being read, once parsed
        self.target = "-"
        self.need = 0
        self.broken = False

    def feed(self, data):
        if self.broken:
            self.emit(data)
            return
        self.buf += data
        while True:
            if self.head is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        self.give_up()
                    return
                head = bytes(self.buf[:end])
                del self.buf[: end + 4]
                self.target, length, chunked = head_fields(head)
                self.counts.request(self.target)
                if chunked or length is None or length < 0:
                    self.buf[:0] = head + b"\r\n\r\n"
                    self.give_up()
                    return
                self.head, self.need = head, length
            if len(self.buf) < self.need:
                return
            body = bytes(self.buf[: self.need])
            del self.buf[: self.need]
            self.send(self.head, body)
            self.head = None

    def send(self, head, body):
        op = self.target.rsplit(".", 1)[-1]
        label, keys = op, 0
        if op == "TransactWriteItems":
            what, keys = self.counts.transaction(self.target, body)
            label = f"{op}/{what}"
        elif op == "BatchExecuteStatement":
            what, keys = self.counts.statements(self.target, body)
            label = f"{op}/{what}"
        elif op in ("UpdateItem", "BatchGetItem"):
            what = self.counts.epoch_call(self.target, body)
            if what:
                label = f"{op}/{what}"  # an epoch record's commit, abort or read ('epochs')
            elif op == "UpdateItem" and self.counts.takes(body):
                keys = 1  # an acquisition: ACQUIRE_UPDATE sets `:pending` (a release deletes)
        if op in BILLED_OPS and body.lstrip().startswith(b"{") and ASKED not in body:
            rest = body.lstrip()[1:]
            body = b"{" + INJECT + (b"," if rest.strip() != b"}" else b"") + rest
            lines = [
                b"Content-Length: %d" % len(body) if line.lower().startswith(b"content-length:") else line
                for line in head.split(b"\r\n")
            ]
            head = b"\r\n".join(lines)
        self.calls.append((op, label, keys, body))
        self.emit(head + b"\r\n\r\n" + body)

    def give_up(self):
        self.broken = True
        self.calls.clear()
        self.calls.append(None)  # the answers are no longer paired with their calls
        self.counts.add("unparsed", 1)
        if self.buf:
            self.emit(bytes(self.buf))
        self.buf = bytearray()

    def end(self):
        """The client closed: whatever is held goes on as it is."""
        if self.buf or self.head is not None:
            if self.head is not None:
                self.buf[:0] = self.head + b"\r\n\r\n"
            self.emit(bytes(self.buf))
            self.buf = bytearray()
            self.head = None


class ResponseParser:
    """--bill: frames the server's answers (Content-Length or chunked bodies) and bills each
    with the call it answers, the oldest one queued on the connection (HTTP/1.1 answers in
    order). Parsing follows forwarding: an answer is queued for the client before it is read
    here."""

    def __init__(self, counts, calls):
        self.counts = counts
        self.calls = calls
        self.buf = bytearray()
        self.status = None
        self.need = 0
        self.chunked = False
        self.body = bytearray()
        self.broken = False

    def feed(self, data):
        if self.broken:
            return
        self.buf += data
        while not self.broken:
            if self.status is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        self.give_up()
                    return
                head = bytes(self.buf[:end])
                del self.buf[: end + 4]
                try:
                    self.status = int(head.split(b" ", 2)[1])
                except (IndexError, ValueError):
                    self.give_up()
                    return
                _, length, self.chunked = head_fields(head)
                if 100 <= self.status < 200:
                    self.status = None  # an interim answer: the real one follows
                    continue
                self.need = 0 if self.chunked else (length or 0)
                self.body = bytearray()
            if self.chunked and not self.need:
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return
                try:
                    size = int(bytes(self.buf[:end]).split(b";", 1)[0].strip() or b"x", 16)
                except ValueError:
                    self.give_up()
                    return
                if size == 0:
                    # The last chunk, then trailers up to an empty line (none here).
                    if self.buf.find(b"\r\n\r\n") < 0:
                        return
                    del self.buf[: self.buf.find(b"\r\n\r\n") + 4]
                    self.answered()
                    continue
                if len(self.buf) < end + 2 + size + 2:
                    return
                self.body += self.buf[end + 2 : end + 2 + size]
                del self.buf[: end + 2 + size + 2]
                continue
            if len(self.buf) < self.need:
                return
            self.body += self.buf[: self.need]
            del self.buf[: self.need]
            self.answered()

    def answered(self):
        call = self.calls.popleft() if self.calls else None
        if call is None:
            self.give_up()
            return
        self.counts.response(call, self.status, bytes(self.body))
        self.status = None
        self.body = bytearray()
        self.need = 0

    def give_up(self):
        if not self.broken:
            self.broken = True
            self.counts.add("unparsed", 1)


def self_test():
    """`python3 benches/lock/billing.py`: the rules above on AWS's own examples."""
    s = lambda n: {"S": "x" * n}  # noqa: E731
    assert number_size("1796511021549") == 8 and number_size("-0.0100") == 2 and number_size("1" * 38) == 20
    assert item_size({"PK": s(1), "x": s(1020)}) == 1024 and units(1024, KB) == 1 and units(1025, KB) == 2
    assert item_size({"m": {"M": {"a": {"BOOL": True}}}, "l": {"L": [{"NULL": True}]}}) == (1 + 3 + 1 + 1 + 1) + (1 + 3 + 1 + 1)
    # "each transaction writes three 500-byte items ... six WCUs" (transaction-apis.html).
    put = lambda k: {"Put": {"TableName": "t", "Item": {"PK": {"S": k}, "v": s(490)}}}  # noqa: E731
    req = {"TransactItems": [put("a"), put("b"), put("c")]}
    assert estimate_success("TransactWriteItems", req, {}) == (6.0, 0.0)
    # Cancelled by one failed condition: every item billed, the old item's size where returned.
    resp = {"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": {"PK": s(1), "v": s(2500)}},
                                    {"Code": "None"}]}
    assert bill_failure("TransactWriteItems", req, resp) == (2.0 * (1 + 3 + 1), 0.0, "cancelled")
    # A failed conditional write: the larger of the existing item and the one written, at least 1.
    cond = {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}
    assert bill_failure("PutItem", {"Item": {"PK": s(3)}}, cond) == (1, 0.0, "condition failed")
    assert bill_failure("UpdateItem", {"Key": {"PK": s(3)}}, dict(cond, Item={"PK": s(3), "v": s(3000)}))[0] == 3
    assert bill_failure("GetItem", {}, {"__type": "x#ValidationException"}) == (0.0, 0.0, "ValidationException")
    # Reads: per 4 KB, halved when eventually consistent; a transaction's answer says which kind.
    assert estimate_success("GetItem", {}, {"Item": {"PK": s(5000)}}) == (0.0, 1.0)
    assert estimate_success("GetItem", {"ConsistentRead": True}, {"Item": {"PK": s(5000)}}) == (0.0, 2.0)
    assert split("TransactWriteItems", [{"CapacityUnits": 2.0, "ReadCapacityUnits": 2.0}]) == (0.0, 2.0)
    assert split("UpdateItem", {"CapacityUnits": 3.0}) == (3.0, 0.0)
    ledger = Ledger()
    ledger.add("UpdateItem", "UpdateItem", 200, b'{"Key":{"PK":{"S":"a"}}}', b'{"ConsumedCapacity":{"CapacityUnits":1.0}}')
    ledger.add("DescribeTable", "DescribeTable", 200, b"{}", b"{}")
    assert (ledger.write, ledger.from_response, ledger.mismatches) == (1.0, 1.0, 0)
    # BatchGetItem: a GetItem per key processed, per 4 KB, 1 unit for a key with no item,
    # halved when eventually consistent; unprocessed keys cost nothing.
    keys = {"Keys": [{"PK": {"S": k}} for k in "abcd"]}
    found = {"Responses": {"t": [{"PK": s(1), "v": s(5000)}]}, "UnprocessedKeys": {"t": {"Keys": [{"PK": {"S": "d"}}]}}}
    strong = {"RequestItems": {"t": dict(keys, ConsistentRead=True)}}
    assert estimate_success("BatchGetItem", strong, found) == (0.0, 4.0)
    assert estimate_success("BatchGetItem", {"RequestItems": {"t": keys}}, found) == (0.0, 2.0)
    # PartiQL statements: the names after the table and the parameters; 1 unit per KB.
    insert = {"Statement": 'INSERT INTO "t" VALUE {\'PK\': ?, \'lock_status\': ?}', "Parameters": [s(3), s(7)]}
    update = {"Statement": 'UPDATE "t" SET "v" = ?, "w" = ? WHERE "PK" = ? AND "v" = ?',
              "Parameters": [s(1000), s(1), s(3), s(1)]}
    assert statement_size(insert) == 2 + 11 + 3 + 7 and statement_size(update) == 4 + 1005
    # Successes and failed conditions billed by size (the old item's where returned), a
    # refused statement nothing; the dynoxide answer of a call where all failed has no
    # ConsumedCapacity.
    big = {"PK": s(1), "v": s(2500)}
    req = {"Statements": [insert, update, insert, update, insert]}
    resp = {"Responses": [{}, {"Error": {"Code": "ConditionalCheckFailed", "Item": big}},
                          {"Error": {"Code": "DuplicateItem"}}, {"Error": {"Code": "ValidationError"}}, {}]}
    assert statements_bill(req, resp) == (1 + 3 + 1 + 0 + 1.0, 0.0, {"ValidationError": 1}, 3)
    ledger = Ledger()
    body = lambda x: json.dumps(x).encode()  # noqa: E731
    ledger.add("BatchExecuteStatement", "BatchExecuteStatement/acquire", 200, body(req), body(resp))
    assert (ledger.write, ledger.estimated, ledger.from_response) == (6.0, 6.0, 0.0)
    assert ledger.unbilled == {"ValidationError (statement)": 1}
    assert "BatchExecuteStatement/acquire some statements failed" in ledger.kinds
    # With ConsumedCapacity (dynoxide: 1 unit for the refused statement, taken off).
    resp["ConsumedCapacity"] = [{"TableName": "t", "CapacityUnits": 7.0}]
    ledger.add("BatchExecuteStatement", "BatchExecuteStatement/acquire", 200, body(req), body(resp))
    assert (ledger.write, ledger.from_response, ledger.mismatches) == (12.0, 6.0, 0)
    every = {"Statements": [update]}
    ledger.add("BatchExecuteStatement", "BatchExecuteStatement/commit", 200, body(every),
               body({"Responses": [{"Error": {"Code": "ConditionalCheckFailed"}}]}))
    assert ledger.write == 12.0 + 1 and "BatchExecuteStatement/commit every statement failed" in ledger.kinds
    # 'epochs': an epoch record's UpdateItem commits (ADD lock_committed) or aborts (ADD
    # lock_aborted), told by its update expression whatever its placeholders; one whose
    # condition failed is billed the larger item, at least 1 unit; a BatchGetItem of epoch
    # records is a read per record.
    epoch_key = {"PK": {"S": "#epoch:host/42/abc:7"}}
    commit = {"Key": epoch_key, "UpdateExpression": "ADD #c :slots, #v :one",
              "ConditionExpression": "NOT contains(#a, :s0)",
              "ExpressionAttributeNames": {"#c": "lock_committed", "#v": "lock_v", "#a": "lock_aborted"},
              "ExpressionAttributeValues": {":slots": {"NS": ["0", "1", "2"]}, ":one": {"N": "1"}, ":s0": {"N": "0"}}}
    abort = dict(commit, UpdateExpression="ADD #a :slots, #v :one")
    assert (epoch_update(commit), epoch_update(abort)) == ("commit", "abort")
    assert epoch_update(dict(commit, UpdateExpression="SET #v = :one")) == "epoch"
    assert epoch_update({"Key": {"PK": {"S": "fi:a"}}, "UpdateExpression": "SET #s = :pending"}) is None
    assert bill_failure("UpdateItem", commit, cond) == (1, 0.0, "condition failed")
    big_epoch = {"PK": epoch_key["PK"], "lock_committed": {"NS": [str(i) for i in range(1000, 1500)]}}
    assert bill_failure("UpdateItem", commit, dict(cond, Item=big_epoch))[0] == 2
    reads = {"RequestItems": {"t": {"Keys": [epoch_key, {"PK": {"S": "#epoch:host/42/abc:8"}}], "ConsistentRead": True}}}
    assert epoch_read(reads) and not epoch_read(strong) and not epoch_read({})
    assert estimate_success("BatchGetItem", reads, {"Responses": {"t": [big_epoch]}}) == (0.0, 2.0)
    reads["RequestItems"]["t"]["ConsistentRead"] = False
    assert estimate_success("BatchGetItem", reads, {"Responses": {"t": [big_epoch]}}) == (0.0, 1.0)
    print("billing.py: ok")


if __name__ == "__main__":
    self_test()
