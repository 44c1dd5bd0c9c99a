// SPDX-License-Identifier: GPL-3.0-or-later
// Palettes; see theme.h.
#include "main/theme.h"

#include <QApplication>
#include <QPalette>
#include <QProcess>
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

void apply_theme(Theme theme) {
  const bool dark = theme == Theme::dark || (theme == Theme::system && desktop_prefers_dark());
  // Fusion draws both palettes faithfully; the platform style may ignore a dark one.
  if (auto* fusion = QStyleFactory::create("Fusion")) QApplication::setStyle(fusion);
  QApplication::setPalette(dark ? dark_palette() : QApplication::style()->standardPalette());
}

}  // namespace spur::studio
