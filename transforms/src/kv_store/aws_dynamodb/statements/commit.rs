//! `lock_acquire: 'statements'` commits: each key's commit an `UPDATE` of the owner's
//! pending record, up to [`STATEMENTS_MAX`] to a call; one whose condition failed is read
//! back strongly consistent and settled from what it found (see the parent module).

use super::*;

impl DynamoDbStore {
    /// The statement that commits `c`'s key: what the transaction's commit update does
    /// (`transact_item` of `Op::Commit`), on the owner's pending record only (an `UPDATE`
    /// written in `form`).
    fn commit_statement(
        &self,
        owner: &str,
        c: &CommitRequest,
        form: Form,
    ) -> Result<BatchStatementRequest, StoreError> {
        let a = &self.table.attributes;
        let mut set = vec![
            (&a.status, AttributeValue::S(COMMITTED.into())),
            (&a.ttl, number(c.ttl)),
        ];
        if let Some(note) = &c.note {
            set.push((&a.note, AttributeValue::S(note.clone())));
        }
        let (key_text, key_params) = self.key_condition(&c.key);
        let set_paths: Vec<String> = set.iter().map(|(name, _)| quoted(name)).collect();
        let remove = [&a.lease_until, &a.since, &a.progress].map(|name| quoted(name));
        let text = format!(
            "UPDATE {} {} WHERE {key_text} AND {} = ? AND {} = ?",
            self.table_quoted(),
            form.clauses(&set_paths, &remove),
            quoted(&a.owner),
            quoted(&a.status),
        );
        let mut params: Vec<AttributeValue> = set.into_iter().map(|(_, v)| v).collect();
        params.extend(key_params);
        params.push(AttributeValue::S(owner.to_string()));
        params.push(AttributeValue::S(PENDING.into()));
        BatchStatementRequest::builder()
            .statement(text)
            .set_parameters(Some(params))
            .build()
            .map_err(|e| self.fail(&format!("committing key {:?}", c.key), e))
    }

    /// Commits with statements of up to [`STATEMENTS_MAX`] keys (see the module
    /// documentation): one result per key, in order.
    pub(in crate::kv_store::aws_dynamodb) async fn commit_statements(
        &self,
        owner: &str,
        requests: &[CommitRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let calls: Vec<_> = requests
            .chunks(STATEMENTS_MAX)
            .map(|chunk| self.commit_chunk(client, owner, chunk))
            .collect();
        let parts: Vec<Result<Vec<Settled>, StoreError>> = stream::iter(calls)
            .buffered(concurrency.max(1))
            .collect()
            .await;
        let mut out = Vec::with_capacity(requests.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// Commits up to [`STATEMENTS_MAX`] keys in one call, sent again after a backoff for
    /// the throttled ones; a key whose condition failed is read back; what the statements
    /// cannot settle is committed in a transaction, as in the other modes.
    async fn commit_chunk(
        &self,
        client: &Client,
        owner: &str,
        chunk: &[CommitRequest],
    ) -> Result<Vec<Settled>, StoreError> {
        let mut out: Vec<Option<Settled>> = vec![None; chunk.len()];
        let what = |left: &[usize]| {
            format!(
                "committing {} keys ({:?}, ...)",
                left.len(),
                chunk[left[0]].key
            )
        };
        let mut check = Vec::new();
        let mut fallback = Vec::new();
        let mut left: Vec<usize> = (0..chunk.len()).collect();
        let mut retries = Retries::default();
        while !left.is_empty() {
            let Some(form) = self.dialect.form() else {
                // Both forms of UPDATE refused: committed in a transaction.
                fallback.append(&mut left);
                break;
            };
            let statements = left
                .iter()
                .map(|&i| self.commit_statement(owner, &chunk[i], form))
                .collect::<Result<Vec<_>, _>>()?;
            let responses = match self.execute(client, statements).await {
                Ok((responses, _)) => responses,
                Err(CallFailed::Refused) => {
                    fallback.append(&mut left);
                    break;
                }
                Err(CallFailed::Failed(why)) => return Err(self.fail(&what(&left), why)),
            };
            if responses.iter().any(read) {
                self.dialect.read(form);
            }
            let mut again = Vec::new();
            let mut rewritten = Vec::new();
            for (&i, response) in left.iter().zip(&responses) {
                let Some(error) = response.error() else {
                    out[i] = Some(Settled::Ok);
                    continue;
                };
                match Outcome::of(error.code()) {
                    Outcome::Changed => check.push(i),
                    Outcome::Transient => again.push(i),
                    Outcome::Refused
                        if self.dialect.refused(form, &self.table.name) == Verdict::Retry =>
                    {
                        rewritten.push(i)
                    }
                    Outcome::Refused | Outcome::Failed => fallback.push(i),
                }
            }
            if !again.is_empty() && !retries.wait_before_next().await {
                return Err(self.fail(
                    &what(&again),
                    format!(
                        "statements still throttled after {} attempts",
                        super::super::lock::STORE_ATTEMPTS
                    ),
                ));
            }
            again.append(&mut rewritten);
            again.sort_unstable();
            left = again;
        }
        if !check.is_empty() {
            let keys: Vec<&str> = check.iter().map(|&i| chunk[i].key.as_str()).collect();
            match self.read_items(client, &keys, true).await {
                Ok(items) => {
                    for i in check {
                        let c = &chunk[i];
                        let current = items.get(&c.key).map(|item| self.decode(item));
                        match &current {
                            // Still the owner's pending lock: the statement did not apply
                            // and nothing says why; the transaction decides.
                            Some(rec) if rec.pending_for(owner) => fallback.push(i),
                            _ => {
                                let change = Change::Commit { ttl: c.ttl };
                                let (_, settled) =
                                    sluice_lock_protocol::change(current.as_ref(), owner, &change);
                                out[i] = Some(settled);
                            }
                        }
                    }
                }
                Err(CallFailed::Refused) => fallback.append(&mut check),
                Err(CallFailed::Failed(why)) => return Err(self.fail(&what(&check), why)),
            }
        }
        if !fallback.is_empty() {
            fallback.sort_unstable();
            let ops = fallback.iter().map(|&i| Op::Commit(&chunk[i])).collect();
            let settled = self.change(owner, ops, 1).await?;
            for (i, s) in fallback.into_iter().zip(settled) {
                out[i] = Some(s);
            }
        }
        Ok(out
            .into_iter()
            .map(|s| s.unwrap_or(Settled::NotOwner(None)))
            .collect())
    }
}
