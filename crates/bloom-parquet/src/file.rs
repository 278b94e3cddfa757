//! A Parquet file's footer and the Bloom filters of its column chunks.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use bloom_core::BloomFilter;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::error::{ParquetFileError, SbbfError};
use crate::sbbf::{self, FilterError, MAX_BITSET_BYTES, MAX_HEADER_BYTES};
use crate::value::ColumnKind;

/// How much of a file the reader will read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest footer (file metadata) read. Default: 64 MiB.
    pub max_footer_bytes: u64,
    /// The largest filter bitset read. Default: 128 MiB, the most Parquet writers make.
    pub max_filter_bytes: u64,
    /// The most filter bytes read from one opened file in all, whatever its metadata says
    /// (row groups may all name the same bytes). Default: 1 GiB.
    pub max_total_filter_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_footer_bytes: 64 << 20,
            max_filter_bytes: MAX_BITSET_BYTES,
            max_total_filter_bytes: 1 << 30,
        }
    }
}

/// A Parquet file opened for its Bloom filters: the decoded footer, and the file to read
/// filters from. No data page is ever read.
#[derive(Debug)]
pub struct ParquetFile {
    path: PathBuf,
    file: File,
    len: u64,
    metadata: ParquetMetaData,
    limits: Limits,
    /// Filter bytes read so far, against [`Limits::max_total_filter_bytes`].
    read: u64,
}

/// A column of a Parquet file: its index among the leaf columns, dotted path and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// The leaf column's index in each row group.
    pub index: usize,
    /// Its dotted path (`a.b` for a field `b` of a group `a`).
    pub path: String,
    /// Its physical type.
    pub kind: ColumnKind,
}

impl ParquetFile {
    /// Opens `path` (a regular file: a FIFO, device or directory is refused without
    /// blocking) and decodes its footer. The footer's length is checked against the file and
    /// `limits` before it is read.
    ///
    /// # Errors
    /// A [`ParquetFileError`]: unreadable, not Parquet, an encrypted footer, a footer too
    /// large, or one that does not decode.
    pub fn open(path: &Path, limits: Limits) -> Result<Self, ParquetFileError> {
        let io = |cause| ParquetFileError::Io {
            path: path.to_owned(),
            cause,
        };
        let mut file = bloom_format::open_regular_file(path).map_err(ParquetFileError::Open)?;
        let len = file.metadata().map_err(io)?.len();
        if len < 12 {
            return Err(ParquetFileError::NotParquet {
                path: path.to_owned(),
            });
        }
        let mut tail = [0u8; 8];
        file.seek(SeekFrom::Start(len - 8)).map_err(io)?;
        file.read_exact(&mut tail).map_err(io)?;
        match &tail[4..] {
            b"PAR1" => {}
            b"PARE" => {
                return Err(ParquetFileError::Encrypted {
                    path: path.to_owned(),
                });
            }
            _ => {
                return Err(ParquetFileError::NotParquet {
                    path: path.to_owned(),
                });
            }
        }
        let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        // The footer sits between the leading magic and the trailing length and magic.
        let limit = limits.max_footer_bytes.min(len - 12);
        if footer_len > limit {
            return Err(ParquetFileError::FooterTooLarge {
                path: path.to_owned(),
                found: footer_len,
                limit,
            });
        }
        let mut footer = vec![0u8; footer_len as usize];
        file.seek(SeekFrom::Start(len - 8 - footer_len))
            .map_err(io)?;
        file.read_exact(&mut footer).map_err(io)?;
        // The decoder is the parquet crate's. It recurses over the footer's structs and its
        // schema tree: both are bounded first, so that no footer can overflow the stack.
        crate::thrift::check_footer(&footer).map_err(|detail| ParquetFileError::Metadata {
            path: path.to_owned(),
            detail: detail.to_owned(),
        })?;
        // A panic in it on a hostile footer is an error here, not an abort of the caller.
        let decoded = std::panic::catch_unwind(|| ParquetMetaDataReader::decode_metadata(&footer));
        let metadata = match decoded {
            Ok(Ok(metadata)) => metadata,
            Ok(Err(e)) => {
                return Err(ParquetFileError::Metadata {
                    path: path.to_owned(),
                    detail: e.to_string(),
                });
            }
            Err(_) => {
                return Err(ParquetFileError::Metadata {
                    path: path.to_owned(),
                    detail: "the decoder failed on it".into(),
                });
            }
        };
        Ok(Self {
            path: path.to_owned(),
            file,
            len,
            metadata,
            limits,
            read: 0,
        })
    }

    /// The filter bytes read from the file so far.
    #[must_use]
    pub fn filter_bytes_read(&self) -> u64 {
        self.read
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The number of row groups.
    #[must_use]
    pub fn row_groups(&self) -> usize {
        self.metadata.num_row_groups()
    }

    /// The rows of a row group (0 for an index past the last).
    #[must_use]
    pub fn rows(&self, row_group: usize) -> u64 {
        self.metadata
            .row_groups()
            .get(row_group)
            .map_or(0, |rg| u64::try_from(rg.num_rows()).unwrap_or(0))
    }

    /// The dotted paths of the leaf columns, in order.
    #[must_use]
    pub fn column_paths(&self) -> Vec<String> {
        let schema = self.metadata.file_metadata().schema_descr();
        (0..schema.num_columns())
            .map(|i| schema.column(i).path().string())
            .collect()
    }

    /// The column with this dotted path, or with this leaf name, if only one column has it.
    ///
    /// # Errors
    /// [`ParquetFileError::NoSuchColumn`] or [`ParquetFileError::AmbiguousColumn`].
    pub fn column(&self, name: &str) -> Result<Column, ParquetFileError> {
        let schema = self.metadata.file_metadata().schema_descr();
        let columns = || (0..schema.num_columns()).map(|i| (i, schema.column(i)));
        // A field named `a.b` and a field `b` of a group `a` have the same dotted path: every
        // match counts, so that neither shadows the other.
        let mut found: Vec<usize> = columns()
            .filter(|(_, c)| c.path().string() == name)
            .map(|(i, _)| i)
            .collect();
        if found.is_empty() {
            found = columns()
                .filter(|(_, c)| c.name() == name)
                .map(|(i, _)| i)
                .collect();
        }
        match found[..] {
            [index] => {
                let descriptor = schema.column(index);
                Ok(Column {
                    index,
                    path: descriptor.path().string(),
                    kind: ColumnKind::of(&descriptor),
                })
            }
            [] => Err(ParquetFileError::NoSuchColumn {
                path: self.path.clone(),
                name: name.to_owned(),
                available: self.column_paths().join(", "),
            }),
            _ => Err(ParquetFileError::AmbiguousColumn {
                path: self.path.clone(),
                name: name.to_owned(),
                matches: found
                    .iter()
                    .map(|&i| schema.column(i).path().string())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The Bloom filter of `column` in `row_group`, as a filter that answers as Parquet's
    /// (`None` when the chunk has none). Its header is checked, and its bitset's place
    /// against the file, before the bitset is read.
    ///
    /// # Errors
    /// [`ParquetFileError::NoSuchRowGroup`], [`ParquetFileError::FilterOutOfFile`],
    /// [`ParquetFileError::FilterBudget`] (past [`Limits::max_total_filter_bytes`]),
    /// [`ParquetFileError::Filter`] (another algorithm, hash or compression, a damaged
    /// header, a bitset over the limit), or an I/O or allocation failure.
    pub fn filter(
        &mut self,
        row_group: usize,
        column: &Column,
    ) -> Result<Option<BloomFilter>, ParquetFileError> {
        let count = self.row_groups();
        let chunk = self
            .metadata
            .row_groups()
            .get(row_group)
            .and_then(|rg| rg.columns().get(column.index))
            .ok_or_else(|| ParquetFileError::NoSuchRowGroup {
                path: self.path.clone(),
                index: row_group,
                count,
            })?;
        let Some(offset) = chunk.bloom_filter_offset() else {
            return Ok(None);
        };
        let announced = chunk.bloom_filter_length();
        let failed = |cause| ParquetFileError::Filter {
            path: self.path.clone(),
            column: column.path.clone(),
            row_group,
            cause,
        };
        let start = u64::try_from(offset)
            .ok()
            .filter(|&start| start < self.len)
            .ok_or(ParquetFileError::FilterOutOfFile {
                path: self.path.clone(),
                column: column.path.clone(),
                row_group,
                offset,
                file_len: self.len,
            })?;
        let io = |cause| ParquetFileError::Io {
            path: self.path.clone(),
            cause,
        };
        // The header first (from at most MAX_HEADER_BYTES, or the announced length), then
        // exactly the bitset it announces, once its place is known to be in the file.
        let window = (self.len - start).min(MAX_HEADER_BYTES as u64).min(
            announced
                .and_then(|l| u64::try_from(l).ok())
                .unwrap_or(u64::MAX),
        );
        let mut head = vec![0u8; window as usize];
        self.file.seek(SeekFrom::Start(start)).map_err(io)?;
        self.file.read_exact(&mut head).map_err(io)?;
        let header = sbbf::parse_header(&head, self.limits.max_filter_bytes).map_err(failed)?;
        let bitset_start = start + header.header_len as u64;
        if header.num_bytes > self.len - bitset_start {
            return Err(failed(SbbfError::BitsetLength {
                expected: header.num_bytes,
                found: self.len - bitset_start,
            }));
        }
        let filter_len = header.header_len as u64 + header.num_bytes;
        if let Some(announced) = announced
            && u64::try_from(announced) != Ok(filter_len)
        {
            return Err(failed(SbbfError::FooterLength {
                footer: i64::from(announced),
                filter: filter_len,
            }));
        }
        let total = self.read.saturating_add(header.num_bytes);
        if total > self.limits.max_total_filter_bytes {
            return Err(ParquetFileError::FilterBudget {
                path: self.path.clone(),
                limit: self.limits.max_total_filter_bytes,
            });
        }
        self.read = total;
        let mut bitset = Vec::new();
        bitset
            .try_reserve_exact(header.num_bytes as usize)
            .map_err(|_| ParquetFileError::Alloc {
                path: self.path.clone(),
                cause: bloom_core::AllocError {
                    bytes: header.num_bytes,
                },
            })?;
        bitset.resize(header.num_bytes as usize, 0);
        self.file.seek(SeekFrom::Start(bitset_start)).map_err(io)?;
        self.file.read_exact(&mut bitset).map_err(io)?;
        match sbbf::filter_from_bitset(&bitset, column.kind.key_encoding()) {
            Ok(filter) => Ok(Some(filter)),
            Err(FilterError::Sbbf(e)) => Err(failed(e)),
            Err(FilterError::Alloc(cause)) => Err(ParquetFileError::Alloc {
                path: self.path.clone(),
                cause,
            }),
        }
    }

    /// The filters of `column` in every row group, in order (`None` for a chunk without one).
    ///
    /// # Errors
    /// As [`ParquetFile::filter`], and [`ParquetFileError::NoFilters`] when no row group has
    /// a filter for the column.
    pub fn filters(
        &mut self,
        column: &Column,
    ) -> Result<Vec<Option<BloomFilter>>, ParquetFileError> {
        let filters = (0..self.row_groups())
            .map(|rg| self.filter(rg, column))
            .collect::<Result<Vec<_>, _>>()?;
        if filters.iter().all(Option::is_none) {
            return Err(ParquetFileError::NoFilters {
                path: self.path.clone(),
                column: column.path.clone(),
                row_groups: filters.len(),
            });
        }
        Ok(filters)
    }
}
