// SPDX-License-Identifier: Apache-2.0
// See byte_text.h: UTF-8 with invalid bytes escaped as lone low surrogates, and back.
#include "launch/byte_text.h"

namespace spur::app {
namespace {

// Length of the valid UTF-8 sequence at bytes[i] and its code point; 0 when it is not one (an unexpected
// continuation byte, a truncated sequence, an overlong form, a surrogate, or past U+10FFFF).
int valid_sequence(const QByteArray& bytes, qsizetype i, char32_t& code) {
  const auto byte = [&](qsizetype k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char lead = byte(i);
  int length;
  char32_t min;
  if (lead < 0x80) {
    code = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, code = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > bytes.size()) return 0;
  for (int k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

// Whether text[i] is an escaped byte: a low surrogate U+DC80..U+DCFF not paired with the high surrogate before it
// (U+12492, valid UTF-8, is D809 DC92: fuzz_launch_arguments found it counted as an escape).
bool escaped_at(const QString& text, qsizetype i) {
  const char16_t unit = text[i].unicode();
  return unit >= 0xDC80 && unit <= 0xDCFF && !(i > 0 && text[i - 1].isHighSurrogate());
}

}  // namespace

QString text_from_bytes(const QByteArray& bytes) {
  QString text;
  text.reserve(bytes.size());
  for (qsizetype i = 0; i < bytes.size();) {
    char32_t code = 0;
    const int length = valid_sequence(bytes, i, code);
    if (length == 0) {
      text += QChar(static_cast<char16_t>(0xDC00 + static_cast<unsigned char>(bytes[i])));
      ++i;
      continue;
    }
    if (code >= 0x10000) {
      text += QChar(QChar::highSurrogate(code));
      text += QChar(QChar::lowSurrogate(code));
    } else {
      text += QChar(static_cast<char16_t>(code));
    }
    i += length;
  }
  return text;
}

QByteArray bytes_from_text(const QString& text) {
  // Qt encodes the text between escaped bytes.
  QByteArray bytes;
  bytes.reserve(text.size());
  qsizetype start = 0;
  for (qsizetype i = 0; i < text.size(); ++i) {
    if (!escaped_at(text, i)) continue;
    bytes += QStringView(text).sliced(start, i - start).toUtf8();
    bytes += static_cast<char>(text[i].unicode() - 0xDC00);
    start = i + 1;
  }
  bytes += QStringView(text).sliced(start).toUtf8();
  return bytes;
}

QString text_with_replacements(const QString& text) {
  QString shown = text;
  for (qsizetype i = 0; i < shown.size(); ++i) {
    if (escaped_at(text, i)) shown[i] = QChar(QChar::ReplacementCharacter);
  }
  return shown;
}

bool holds_escaped_bytes(const QString& text) {
  for (qsizetype i = 0; i < text.size(); ++i) {
    if (escaped_at(text, i)) return true;
  }
  return false;
}

}  // namespace spur::app
