// SPDX-License-Identifier: Apache-2.0
// Bytes that are not UTF-8 (file names, arguments, environment values and rank output on Linux are bytes) carried
// through QString unchanged: each byte of an invalid sequence becomes a lone low surrogate U+DC80..U+DCFF on the
// way in and the same byte on the way out, as Python's "surrogateescape". Valid UTF-8 is decoded as usual, so
// text that is UTF-8 behaves exactly as with QString::fromUtf8. Issue 12, defect 10: `spur launch` rewrote such
// bytes to U+FFFD, and a program under such a path "could not be found".
#pragma once

#include <QByteArray>
#include <QString>

namespace spur::app {

/// Decodes UTF-8, each byte of an invalid sequence kept as U+DC00 + byte.
QString text_from_bytes(const QByteArray& bytes);

/// Encodes as UTF-8, U+DC80..U+DCFF back to the byte they stand for (other lone surrogates as '?', as toUtf8).
QByteArray bytes_from_text(const QString& text);

/// The same text with each escaped byte as U+FFFD (the replacement character): what is stored as text (the run
/// history's console), where the bytes themselves cannot go and toUtf8 would make them '?'.
QString text_with_replacements(const QString& text);

/// Whether text holds an escaped byte (and so needs bytes_from_text, not toUtf8, to reach the system).
bool holds_escaped_bytes(const QString& text);

}  // namespace spur::app
