// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio's light and dark palettes (Fusion style), and which one the desktop asks for. Qt 6.4 has no
// colour-scheme hint, so "system" reads the desktop's setting (GNOME's color-scheme, GTK_THEME) itself.
#pragma once

#include <QIcon>
#include <QString>

namespace spur::studio {

enum class Theme { system, light, dark };

Theme theme_from_name(const QString& name);
QString theme_name(Theme theme);
/// Whether the desktop prefers dark: GTK_THEME ending in ":dark", GNOME's color-scheme 'prefer-dark', or a
/// platform palette whose windows are dark.
bool desktop_prefers_dark();
/// Applies the palette to the whole application (system: light or dark as the desktop prefers).
void apply_theme(Theme theme);

/// The run actions' icons, drawn in colours that read on the light and the dark palette alike (Fusion's
/// media icons are near-black: on the dark palette Launch and Stop were almost invisible). 16 to 48 px.
enum class RunIcon { launch, stop, relaunch };
QIcon run_icon(RunIcon kind);

}  // namespace spur::studio
