//! Deleting documents by term, at the cost of the term alone.
//!
//! tantivy's `IndexWriter::delete_term` turns the term into a `TermQuery` weight, and even with
//! scoring disabled that weight carries a BM25 cache of 256 floats: about 1.1 KiB per delete.
//! The writer keeps a pass's deletes until its next commit (the cursors of its fresh segments
//! point at them), so the indexer, which deletes every product it writes, held a kilobyte per
//! product of its last pass between passes, counted by no cache. [`TermDelete`] matches the
//! same documents with the term and nothing else.

use tantivy::query::{ConstScorer, EmptyScorer, EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::schema::{IndexRecordOption, Term};
use tantivy::{DocId, DocSet, IndexWriter, Score, SegmentReader, TantivyDocument, TantivyError};

/// Deletes every document with `term` when the writer commits.
pub fn delete(writer: &IndexWriter<TantivyDocument>, term: Term) -> tantivy::Result<()> {
    writer.delete_query(Box::new(TermDelete(term))).map(drop)
}

/// The documents holding one term, unscored: what a delete needs of a query.
#[derive(Clone, Debug)]
struct TermDelete(Term);

impl Query for TermDelete {
    fn weight(&self, _: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(self.clone()))
    }
}

impl Weight for TermDelete {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let index = reader.inverted_index(self.0.field())?;
        Ok(match index.read_postings(&self.0, IndexRecordOption::Basic)? {
            Some(postings) => Box::new(ConstScorer::new(postings, boost)),
            None => Box::new(EmptyScorer),
        })
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        if self.scorer(reader, 1.0)?.seek(doc) == doc {
            Ok(Explanation::new("TermDelete", 1.0))
        } else {
            Err(TantivyError::InvalidArgument(format!("document {doc} does not match")))
        }
    }
}

#[cfg(test)]
mod tests {
    use tantivy::collector::Count;
    use tantivy::query::TermQuery;
    use tantivy::schema::{STRING, Schema};
    use tantivy::{Index, doc};

    use super::*;

    #[test]
    fn deletes_the_documents_with_the_term_and_no_other() {
        let mut schema = Schema::builder();
        let key = schema.add_text_field("key", STRING);
        let index = Index::create_in_ram(schema.build());
        let mut writer: IndexWriter<TantivyDocument> = index.writer_with_num_threads(1, 15_000_000).unwrap();
        for k in ["a", "b", "b", "c"] {
            writer.add_document(doc!(key => k)).unwrap();
        }
        writer.commit().unwrap();
        // Deleted across two segments: one committed, one written in the same pass.
        writer.add_document(doc!(key => "b")).unwrap();
        writer.commit().unwrap();
        delete(&writer, Term::from_field_text(key, "b")).unwrap();
        delete(&writer, Term::from_field_text(key, "absent")).unwrap();
        writer.commit().unwrap();
        let searcher = index.reader().unwrap().searcher();
        let count =
            |k: &str| searcher.search(&TermQuery::new(Term::from_field_text(key, k), IndexRecordOption::Basic), &Count).unwrap();
        assert_eq!((count("a"), count("b"), count("c")), (1, 0, 1));
        assert_eq!(searcher.num_docs(), 2);
    }
}
