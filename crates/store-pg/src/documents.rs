//! Small JSON documents a front end keeps beside the sessions, by kind and
//! id (`pod_documents`): the Managed Agents API's agents, environments
//! and sessions' settings, shared by every server of a fleet. The store
//! knows nothing of what they say; each is written whole, in one
//! statement.

use crate::store::PgStore;
use pod::PodError;

impl PgStore {
    /// Writes document `id` of `kind` (replacing it).
    pub async fn put_document(&self, kind: &str, id: &str, body: &str) -> Result<(), PodError> {
        let conn = self.conn().await?;
        conn.client
            .execute(
                "INSERT INTO pod_documents (kind, id, body) VALUES ($1::text, $2::text, $3::text)
                 ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, updated_at = now()",
                &[&kind, &id, &body],
            )
            .await
            .map_err(self.err("writing a document"))?;
        Ok(())
    }

    /// Document `id` of `kind`, if there is one.
    pub async fn document(&self, kind: &str, id: &str) -> Result<Option<String>, PodError> {
        let conn = self.conn().await?;
        let row = conn
            .client
            .query_opt(
                "SELECT body FROM pod_documents WHERE kind = $1::text AND id = $2::text",
                &[&kind, &id],
            )
            .await
            .map_err(self.err("reading a document"))?;
        Ok(row.map(|row| row.get(0)))
    }

    /// Every document of `kind`, by id.
    pub async fn documents(&self, kind: &str) -> Result<Vec<String>, PodError> {
        let conn = self.conn().await?;
        let rows = conn
            .client
            .query(
                "SELECT body FROM pod_documents WHERE kind = $1::text ORDER BY id",
                &[&kind],
            )
            .await
            .map_err(self.err("reading documents"))?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// Removes document `id` of `kind`; whether there was one.
    pub async fn remove_document(&self, kind: &str, id: &str) -> Result<bool, PodError> {
        let conn = self.conn().await?;
        let removed = conn
            .client
            .execute(
                "DELETE FROM pod_documents WHERE kind = $1::text AND id = $2::text",
                &[&kind, &id],
            )
            .await
            .map_err(self.err("removing a document"))?;
        Ok(removed == 1)
    }
}
