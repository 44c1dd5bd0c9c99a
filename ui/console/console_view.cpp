// SPDX-License-Identifier: GPL-3.0-or-later
// The run console; see console_view.h.
#include "console/console_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QStyledItemDelegate>
#include <QVBoxLayout>

#include "studio/console_model.h"

#include <algorithm>
#include <cmath>
#include "runs/run_status.h"

namespace spur::studio {
namespace {

// Every line's size: the longest line's width in the view's font (its uniform item size), measured (tabs and wide
// characters included).
class LineDelegate : public QStyledItemDelegate {
 public:
  LineDelegate(const app::ConsoleModel* model, QObject* parent) : QStyledItemDelegate(parent), model_(model) {}
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QSize size = QStyledItemDelegate::sizeHint(option, index);
    const int width = option.fontMetrics.horizontalAdvance(model_->longest_line_text()) +
                      2 * option.fontMetrics.horizontalAdvance(QLatin1Char('M'));
    return {std::max(size.width(), width), size.height()};
  }

 private:
  const app::ConsoleModel* model_;
};

}  // namespace

ConsoleView::ConsoleView(const QString& history_path, QWidget* parent)
    : QWidget(parent),
      model_(new app::ConsoleModel(history_path, this)),
      list_(new QListView(this)),
      ranks_(new QComboBox(this)),
      hosts_(new QComboBox(this)),
      banner_(new QLabel(this)),
      search_(new QLineEdit(this)),
      follow_(new QCheckBox(tr("Follow"), this)) {
  worker_ = new QObject;
  source_ = std::make_unique<app::ConsoleSource>(history_path);
  worker_->moveToThread(&thread_);
  thread_.start();
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  ranks_->setObjectName("ranks");
  ranks_->addItem(tr("All ranks"), QVariant());
  ranks_->addItem(tr("Launcher"), -1);
  hosts_->setObjectName("hosts");
  hosts_->addItem(tr("All hosts"), QVariant());
  hosts_->hide();  // shown once a second host appears
  banner_->setObjectName("banner");
  banner_->setWordWrap(true);
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->setMargin(6);
  search_->setObjectName("search");
  search_->setPlaceholderText(tr("Search"));
  search_->setClearButtonEnabled(true);
  follow_->setChecked(true);
  bar->addWidget(new QLabel(tr("Show"), this));
  bar->addWidget(ranks_);
  bar->addWidget(hosts_);
  bar->addWidget(search_, 1);
  bar->addWidget(follow_);
  layout->addWidget(banner_);
  layout->addLayout(bar);
  list_->setModel(model_);
  list_->setObjectName("console_lines");
  list_->setUniformItemSizes(true);  // fast with tens of thousands of lines
  list_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  // Long lines scroll sideways, as in a terminal, instead of ending in "..." (every line is as wide as the
  // longest: uniform sizes keep tens of thousands of lines fast); the tooltip has a long line whole too.
  list_->setTextElideMode(Qt::ElideNone);
  list_->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  list_->setItemDelegate(new LineDelegate(model_, list_));
  connect(model_, &app::ConsoleModel::longest_line_grew, list_, [this] { list_->doItemsLayout(); });
  list_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  layout->addWidget(list_, 1);
  connect(ranks_, &QComboBox::currentIndexChanged, this, [this] { filter_changed(); });
  connect(hosts_, &QComboBox::currentIndexChanged, this, [this] { filter_changed(); });
  connect(model_, &app::ConsoleModel::run_changed, this, [this] { update_banner(); });
  connect(follow_, &QCheckBox::toggled, this, [this](bool on) {
    if (on) list_->scrollToBottom();
  });
  // Scrolling up pauses following; back at the bottom, it follows again.
  connect(list_->verticalScrollBar(), &QAbstractSlider::actionTriggered, this, [this](int) {
    auto* bar = list_->verticalScrollBar();
    follow_->setChecked(bar->sliderPosition() >= bar->maximum());
  });
  connect(search_, &QLineEdit::textChanged, this, [this] { filter_changed(); });
  connect(model_, &QAbstractItemModel::rowsInserted, this, [this](const QModelIndex&, int first, int last) {
    for (int row = first; row <= last; ++row) {
      const int rank = model_->data(model_->index(row), app::ConsoleModel::RankRole).toInt();
      if (rank >= 0 && known_ranks_.insert(rank).second) {
        int at = 2;
        while (at < ranks_->count() && ranks_->itemData(at).toInt() < rank) ++at;
        ranks_->insertItem(at, tr("Rank %1").arg(rank), rank);
      }
      const QString host = model_->data(model_->index(row), app::ConsoleModel::HostRole).toString();
      if (!host.isEmpty() && known_hosts_.insert(host).second) {
        hosts_->addItem(host, host);
        hosts_->setVisible(known_hosts_.size() > 1);
      }
    }
    if (follow_->isChecked()) list_->scrollToBottom();
  });
}

void ConsoleView::set_run(qint64 run) {
  if (run == current_run_) return;
  current_run_ = run;
  // Another run has other ranks and hosts.
  {
    const QSignalBlocker block_ranks(ranks_), block_hosts(hosts_);
    while (ranks_->count() > 2) ranks_->removeItem(2);
    while (hosts_->count() > 1) hosts_->removeItem(1);
    ranks_->setCurrentIndex(0);
    hosts_->setCurrentIndex(0);
    hosts_->hide();
  }
  known_ranks_.clear();
  known_hosts_.clear();
  model_->set_rank(std::nullopt);
  model_->set_host(std::nullopt);
  model_->set_run(run);
  refresh();
}

void ConsoleView::filter_changed() {
  const QVariant rank = ranks_->currentData();
  model_->set_rank(rank.isValid() ? std::optional<int>(rank.toInt()) : std::nullopt);
  const QVariant host = hosts_->currentData();
  model_->set_host(host.isValid() ? std::optional<QString>(host.toString()) : std::nullopt);
  model_->set_search(search_->text());
  refresh();
}

ConsoleView::~ConsoleView() {
  thread_.quit();
  thread_.wait();  // no read is under way or will call back after this
  delete worker_;
}

void ConsoleView::refresh() {
  if (in_flight_) {
    again_ = true;
    return;
  }
  in_flight_ = true;
  QMetaObject::invokeMethod(
      worker_,
      [this, query = model_->next_query()] {
        auto batch = source_->read(query);  // on thread_
        {
          const std::lock_guard lock(batch_mutex_);
          batch_ = std::make_unique<app::ConsoleBatch>(std::move(batch));
        }
        QMetaObject::invokeMethod(this, "take_batch", Qt::QueuedConnection);
      },
      Qt::QueuedConnection);
}

void ConsoleView::take_batch() {
  std::unique_ptr<app::ConsoleBatch> batch;
  {
    const std::lock_guard lock(batch_mutex_);
    batch = std::move(batch_);
  }
  if (batch) received(*batch);
}

void ConsoleView::received(const app::ConsoleBatch& batch) {
  in_flight_ = false;
  model_->apply(batch);
  if (again_) {
    again_ = false;
    refresh();
  }
}

QString ConsoleView::banner() const { return banner_->text(); }

void ConsoleView::update_banner() {
  const auto& run = model_->run_record();
  if (!run) {
    banner_->hide();
    banner_->clear();
    return;
  }
  const QString status = app::effective_status(*run);
  QString text = tr("Run %1 (%2): %3").arg(run->id).arg(QString::fromStdString(run->name), status);
  if (run->exit_code) text += tr(", exit code %1").arg(*run->exit_code);
  if (!model_->cause().isEmpty()) text += "\n" + model_->cause();
  banner_->setText(text);
  // In both themes: the dark one's text on a red wash read at 1.7:1.
  const auto colours = banner_colours(status, palette());
  banner_->setStyleSheet(
      colours ? QString("background: %1; color: %2; border-left: 4px solid %3;")
                    .arg(colours->background.name(), colours->text.name(), status == "failed" ? "#d32f2f" : "#f0a000")
              : QString());
  banner_->show();
}

void ConsoleView::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) update_banner();  // the theme changed
  QWidget::changeEvent(event);
}

double ConsoleView::contrast_ratio(const QColor& a, const QColor& b) {
  const auto luminance = [](const QColor& c) {
    const auto channel = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF());
  };
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

std::optional<ConsoleView::BannerColours> ConsoleView::banner_colours(const QString& status, const QPalette& palette) {
  QColor accent;
  if (status == "failed") accent = QColor(0xd3, 0x2f, 0x2f);
  else if (status == "stopped") accent = QColor(0xf0, 0xa0, 0x00);
  else return std::nullopt;
  const QColor window = palette.color(QPalette::Window);
  const double wash = 0.18;
  BannerColours colours;
  colours.background = QColor::fromRgbF(static_cast<float>(window.redF() * (1 - wash) + accent.redF() * wash),
                                        static_cast<float>(window.greenF() * (1 - wash) + accent.greenF() * wash),
                                        static_cast<float>(window.blueF() * (1 - wash) + accent.blueF() * wash));
  colours.text = palette.color(QPalette::WindowText);
  if (contrast_ratio(colours.text, colours.background) < 4.5) {
    colours.text = contrast_ratio(Qt::black, colours.background) >= contrast_ratio(Qt::white, colours.background)
                       ? QColor(Qt::black)
                       : QColor(Qt::white);
  }
  return colours;
}

}  // namespace spur::studio
