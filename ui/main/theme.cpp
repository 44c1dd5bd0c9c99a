// SPDX-License-Identifier: GPL-3.0-or-later
// Palettes; see theme.h.
#include "main/theme.h"

#include <QApplication>
#include <QPainter>
#include <QPainterPath>
#include <QPalette>
#include <QPixmap>
#include <QProcess>
#include <QSettings>
#include <QStandardPaths>
#include <QStyle>
#include <QStyleFactory>

namespace spur::studio {

Theme theme_from_name(const QString& name) {
  return name == "dark" ? Theme::dark : name == "light" ? Theme::light : Theme::system;
}

QString theme_name(Theme theme) { return theme == Theme::dark ? "dark" : theme == Theme::light ? "light" : "system"; }

bool desktop_prefers_dark() {
  const QString gtk = qEnvironmentVariable("GTK_THEME");
  if (!gtk.isEmpty()) return gtk.endsWith(":dark", Qt::CaseInsensitive);
  const QString gsettings = QStandardPaths::findExecutable("gsettings");
  if (!gsettings.isEmpty() && !qEnvironmentVariableIsSet("SPUR_NO_GSETTINGS")) {
    QProcess query;
    query.start(gsettings, {"get", "org.gnome.desktop.interface", "color-scheme"});
    if (query.waitForFinished(1000) && query.exitCode() == 0) {
      const QString scheme = QString::fromUtf8(query.readAllStandardOutput());
      if (scheme.contains("dark")) return true;
      if (scheme.contains("light")) return false;
    }
  }
  return QApplication::style()->standardPalette().color(QPalette::Window).lightness() < 128;
}

namespace {

QPalette dark_palette() {
  QPalette p;
  const QColor window(37, 38, 41), base(27, 28, 30), text(222, 222, 222), disabled(120, 120, 120);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, window);
  p.setColor(QPalette::ToolTipBase, QColor(50, 52, 56));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, disabled);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, window);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(255, 90, 90));
  p.setColor(QPalette::Link, QColor(90, 160, 255));
  p.setColor(QPalette::Highlight, QColor(42, 110, 200));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Mid, QColor(60, 62, 66));
  p.setColor(QPalette::Dark, QColor(20, 20, 22));
  for (auto role : {QPalette::Text, QPalette::WindowText, QPalette::ButtonText}) {
    p.setColor(QPalette::Disabled, role, disabled);
  }
  return p;
}

}  // namespace

QIcon run_icon(RunIcon kind) {
  // Mid-tone colours: a contrast of 3:1 or more against both palettes' windows (light grey and 37,38,41).
  const QColor green(34, 134, 58), red(218, 54, 51), blue(56, 132, 244);
  QIcon icon;
  for (const int size : {16, 24, 32, 48}) {
    QPixmap pixmap(size, size);
    pixmap.fill(Qt::transparent);
    QPainter painter(&pixmap);
    painter.setRenderHint(QPainter::Antialiasing);
    const double s = size;
    // A filled triangle through three points given in fractions of the icon's size.
    const auto triangle = [&](QPointF a, QPointF b, QPointF c, const QColor& colour) {
      QPainterPath path;
      path.moveTo(a * s);
      path.lineTo(b * s);
      path.lineTo(c * s);
      path.closeSubpath();
      painter.fillPath(path, colour);
    };
    switch (kind) {
      case RunIcon::launch:
        triangle({0.25, 0.15}, {0.85, 0.5}, {0.25, 0.85}, green);
        break;
      case RunIcon::stop:
        painter.setPen(Qt::NoPen);
        painter.setBrush(red);
        painter.drawRoundedRect(QRectF(0.2 * s, 0.2 * s, 0.6 * s, 0.6 * s), 0.08 * s, 0.08 * s);
        break;
      case RunIcon::relaunch: {
        // A circular arrow: three quarters of a ring and its head.
        QPen pen(blue, std::max(2.0, 0.12 * s), Qt::SolidLine, Qt::FlatCap);
        painter.setPen(pen);
        const QRectF ring(0.2 * s, 0.2 * s, 0.6 * s, 0.6 * s);
        painter.drawArc(ring, 90 * 16, 270 * 16);
        triangle({0.5, 0.04}, {0.72, 0.2}, {0.5, 0.36}, blue);
        break;
      }
    }
    painter.end();
    icon.addPixmap(pixmap);
  }
  return icon;
}

void apply_theme(Theme theme) {
  const bool dark = theme == Theme::dark || (theme == Theme::system && desktop_prefers_dark());
  // Fusion draws both palettes faithfully; the platform style may ignore a dark one.
  if (auto* fusion = QStyleFactory::create("Fusion")) QApplication::setStyle(fusion);
  QApplication::setPalette(dark ? dark_palette() : QApplication::style()->standardPalette());
}

Theme saved_theme() { return theme_from_name(QSettings().value("view/theme", "system").toString()); }

void choose_theme(Theme theme) {
  QSettings().setValue("view/theme", theme_name(theme));
  apply_theme(theme);
}

void use_settings_of(const QString& application_name) {
  QCoreApplication::setApplicationName(application_name);
  apply_theme(saved_theme());
}

}  // namespace spur::studio
